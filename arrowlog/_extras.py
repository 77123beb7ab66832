"""Optional dependencies, grouped as the extras of ``pyproject.toml``.

The core (``pip install arrowlog``) reads and writes memory and local-directory
stores. S3, Spark, Delta and Iceberg each need an extra; reaching one of them without it
raises :class:`~arrowlog.errors.MissingDependencyError` naming the extra, instead
of a bare ``No module named 's3fs'`` from deep inside arrowlog.
"""

from __future__ import annotations

import importlib
from types import ModuleType

from arrowlog.errors import MissingDependencyError

#: extra -> (the modules it provides that arrowlog imports, what it is for)
EXTRAS: dict[str, tuple[tuple[str, ...], str]] = {
    # obstore is the client; botocore finds credentials as the AWS CLI does
    # (and `arrowlog s3-server` creates buckets with it)
    "s3": (("obstore", "botocore"), "an s3:// store"),
    "s3fs": (("s3fs", "botocore"), "an s3:// store with the storage option client=s3fs"),
    "gcs": (("obstore",), "a gs:// store"),
    "azure": (("obstore",), "an az:// store"),
    "spark": (("pyspark", "pandas"), "the Spark data source (arrowlog.spark)"),
    "delta": (("deltalake",), "the Delta export"),
    # pyiceberg with its SQL catalog (SQLAlchemy) and pyarrow writer
    "iceberg": (("pyiceberg", "sqlalchemy"), "the Iceberg export"),
}


def require_extra(extra: str) -> tuple[ModuleType, ...]:
    """Import the modules of ``extra`` and return them.

    Raises:
        MissingDependencyError: one of them cannot be imported; the message says
            ``pip install 'arrowlog[<extra>]'`` and why the import failed.
    """
    modules, purpose = EXTRAS[extra]
    try:
        return tuple(importlib.import_module(name) for name in modules)
    except ImportError as e:
        raise MissingDependencyError(
            f"{purpose} needs the {extra!r} extra: pip install 'arrowlog[{extra}]' ({e})",
            name=e.name,
        ) from e
