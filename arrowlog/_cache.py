"""Where arrowlog keeps what it builds or installs on a user's machine (the
JVM reader's jar, the test suite's Azure emulator)."""

from __future__ import annotations

import os
from pathlib import Path

#: the environment variable naming arrowlog's cache directory (else
#: ``$XDG_CACHE_HOME/arrowlog``, else ``~/.cache/arrowlog``)
CACHE_ENV = "ARROWLOG_CACHE_DIR"


def cache_dir() -> Path:
    """``$ARROWLOG_CACHE_DIR``, else ``$XDG_CACHE_HOME/arrowlog``, else
    ``~/.cache/arrowlog``."""
    named = os.environ.get(CACHE_ENV)
    if named:
        return Path(named)
    xdg = os.environ.get("XDG_CACHE_HOME")
    return (Path(xdg) if xdg else Path.home() / ".cache") / "arrowlog"
