"""The emulators the suite starts (arrowlog/testing/azurite.py, fakegcs.py):
they live as long as the process that started them, and no longer."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from arrowlog.testing import azurite

#: a process that starts both emulators, says their pids, then waits to be killed
_STARTER = """
import json, sys, time
from pathlib import Path
from arrowlog.testing import azurite, fakegcs
workdir = Path(sys.argv[1])
gcs = fakegcs.start(workdir)
az = azurite.start(workdir)
print(json.dumps([*(p.pid for p in gcs.processes), az.process.pid]), flush=True)
time.sleep(120)
"""


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return False
    return state != "Z"


@pytest.mark.azure
@pytest.mark.gcs
def test_the_emulators_die_with_a_test_process_killed_by_sigkill(tmp_path: Path) -> None:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    starter = subprocess.Popen(
        [sys.executable, "-c", _STARTER, str(tmp_path)],
        stdout=subprocess.PIPE,
        env=env,
    )
    pids: list[int] = []
    try:
        assert starter.stdout is not None
        line = starter.stdout.readline()  # the emulators started (or it failed: no line)
        assert line, f"the starter failed: exit {starter.wait(timeout=60)}"
        pids = json.loads(line)
        assert all(_alive(pid) for pid in pids)
        starter.send_signal(signal.SIGKILL)
        starter.wait(timeout=10)
        deadline = time.monotonic() + 10
        while any(_alive(pid) for pid in pids) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert [pid for pid in pids if _alive(pid)] == [], "emulators outlived their test process"
    finally:
        if starter.poll() is None:
            starter.kill()
            starter.wait()
        if starter.stdout is not None:
            starter.stdout.close()
        for pid in pids:  # what this test started, if it outlived the starter
            if _alive(pid):
                os.kill(pid, signal.SIGKILL)


def _fake_npm(bin_dir: Path, script: str) -> None:
    bin_dir.mkdir()
    npm = bin_dir / "npm"
    npm.write_text(f"#!/bin/sh\n{script}\n")
    npm.chmod(0o755)


@pytest.mark.parametrize(
    ("script", "said"),
    [
        pytest.param("exec sleep 30", "did not finish", id="registry-hangs"),
        pytest.param("echo 'npm ERR! network' >&2; exit 1", "npm ERR! network", id="fails"),
        pytest.param("exit 0", "installed no azurite-blob", id="installs-nothing"),
    ],
)
def test_an_azurite_install_that_cannot_finish_says_so_in_bounded_time(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, script: str, said: str
) -> None:
    _fake_npm(tmp_path / "bin", script)
    monkeypatch.setenv("PATH", f"{tmp_path / 'bin'}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.setenv("ARROWLOG_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setattr(azurite, "INSTALL_TIMEOUT_S", 1.0)
    started = time.monotonic()

    with pytest.raises(azurite.AzuriteMissingError, match=said) as missing:
        azurite.azurite_binary()

    assert f"azurite@{azurite.VERSION}" in str(missing.value)
    assert time.monotonic() - started < 10
    assert list((tmp_path / "cache").iterdir()) == []  # no partial install left


def test_azurite_without_npm_says_what_to_install(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))
    monkeypatch.setenv("ARROWLOG_CACHE_DIR", str(tmp_path / "cache"))
    with pytest.raises(azurite.AzuriteMissingError, match="needs npm"):
        azurite.azurite_binary()


def test_an_azurite_install_that_times_out_leaves_nothing_of_npm_running(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    child = tmp_path / "child.pid"
    _fake_npm(tmp_path / "bin", f"sleep 30 &\necho $! > {child}\nwait")
    monkeypatch.setenv("PATH", f"{tmp_path / 'bin'}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.setenv("ARROWLOG_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setattr(azurite, "INSTALL_TIMEOUT_S", 1.0)
    with pytest.raises(azurite.AzuriteMissingError, match="did not finish"):
        azurite.azurite_binary()
    pid = int(child.read_text())
    deadline = time.monotonic() + 5
    while _alive(pid) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not _alive(pid), "what npm started outlived the install's timeout"
