"""The catalog's side of an Iceberg export (:mod:`arrowlog.jobs.export_iceberg`):
how to open a pyiceberg catalog (:class:`CatalogConfig`: the SQL catalog on
SQLite by default, any catalog by its properties or by name), table
identifiers, loading or creating the table, and pyiceberg's, its catalog's
and its FileIO's errors as arrowlog's."""

from __future__ import annotations

import contextlib
import json
import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pyarrow as pa

from arrowlog._extras import require_extra
from arrowlog.errors import (
    ArrowLogError,
    ExportConflictError,
    ExportTableError,
    InvalidConfigError,
    InvalidNameError,
)

if TYPE_CHECKING:
    from pyiceberg.catalog import Catalog
    from pyiceberg.table import Table

DEFAULT_CATALOG_NAME = "arrowlog"
#: the SQLite file of the default catalog, inside the warehouse
CATALOG_FILE = "catalog.db"
_NAME_PART = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_-]*")


@dataclass(frozen=True)
class CatalogConfig:
    """How to open a pyiceberg catalog: its name and properties
    (``pyiceberg.catalog.load_catalog(name, **properties)``). No properties:
    the named catalog of pyiceberg's own configuration (``~/.pyiceberg.yaml``,
    ``PYICEBERG_CATALOG__<NAME>__*``)."""

    name: str = DEFAULT_CATALOG_NAME
    properties: Mapping[str, str] = field(default_factory=dict)

    @classmethod
    def sqlite(
        cls, warehouse: str, *, uri: str | None = None, name: str = DEFAULT_CATALOG_NAME
    ) -> CatalogConfig:
        """A SQL catalog (``uri``: any SQLAlchemy URL; default an SQLite file
        ``catalog.db`` in a local ``warehouse``) whose tables live under
        ``warehouse`` (a directory or a URL pyiceberg's FileIO reaches).

        Raises:
            InvalidConfigError: a remote warehouse without ``uri``.
        """
        local = "://" not in warehouse or warehouse.startswith("file://")
        if local:
            path = Path(warehouse.removeprefix("file://")).expanduser().resolve()
            warehouse = path.as_uri()
            uri = uri or f"sqlite:///{path / CATALOG_FILE}"
        elif uri is None:
            raise InvalidConfigError(
                f"warehouse {warehouse!r} is not a local directory: give the catalog's "
                "URI too (an SQLite catalog is a local file)"
            )
        return cls(name, {"type": "sql", "uri": uri, "warehouse": warehouse})

    @classmethod
    def resolve(
        cls,
        *,
        name: str = DEFAULT_CATALOG_NAME,
        warehouse: str | None = None,
        uri: str | None = None,
        properties: Mapping[str, Any] | None = None,
    ) -> CatalogConfig:
        """The catalog the command line's options name: ``properties`` (any
        pyiceberg catalog; ``warehouse`` and ``uri`` added to them when given),
        else a SQL catalog in ``warehouse`` (:meth:`sqlite`), else the catalog
        ``name`` of pyiceberg's own configuration.

        Raises:
            InvalidConfigError: none of these, or ``uri`` without a warehouse.
        """
        if properties:
            props = {
                str(k): v if isinstance(v, str) else json.dumps(v) for k, v in properties.items()
            }
            if warehouse:
                props["warehouse"] = warehouse
            if uri:
                props["uri"] = uri
            return cls(name, props)
        if warehouse:
            return cls.sqlite(warehouse, uri=uri, name=name)
        if uri:
            raise InvalidConfigError(
                "a catalog URI needs a warehouse too: where tables are written"
            )
        if name != DEFAULT_CATALOG_NAME:
            return cls(name, {})
        raise InvalidConfigError(
            "no Iceberg catalog given: a warehouse directory (an SQLite catalog is kept in "
            f"it as {CATALOG_FILE}), catalog properties, or the name of a catalog configured "
            "for pyiceberg (.pyiceberg.yaml)"
        )

    def open(self) -> Catalog:
        """The catalog (a local SQLite catalog's directory is created).

        Raises:
            InvalidConfigError: properties pyiceberg cannot make a catalog of
                (an unknown type, a required property missing...).
            MissingDependencyError: pyiceberg is not installed.
        """
        require_extra("iceberg")
        from pyiceberg.catalog import CatalogType, load_catalog
        from sqlalchemy.exc import OperationalError

        kind = self.properties.get("type")
        known = [t.value for t in CatalogType]
        if isinstance(kind, str) and kind.lower() not in known:
            raise InvalidConfigError(
                f"Iceberg catalog {self.name!r}: unknown catalog type {kind!r} (pyiceberg "
                f"knows {', '.join(known)}; or give py-catalog-impl instead)"
            )
        uri = self.properties.get("uri", "")
        if uri.startswith("sqlite:///"):
            Path(uri.removeprefix("sqlite:///")).parent.mkdir(parents=True, exist_ok=True)
        lost = 0
        while True:
            try:
                return load_catalog(self.name, **self.properties)
            except ValueError as e:
                # load_catalog's own word for properties it cannot use
                raise InvalidConfigError(f"Iceberg catalog {self.name!r}: {e}") from e
            except OperationalError as e:
                # A new SQL catalog creates its tables when first opened; of two
                # processes opening it at once, one loses that race (seen with
                # two exporters on a new warehouse). Opened again, it finds them.
                lost += 1
                if "already exists" not in str(e) or lost == 3:
                    raise


def check_identifier(identifier: str) -> tuple[str, ...]:
    """``namespace.table`` (namespaces may nest: ``a.b.table``) as a tuple.
    Parts are letters, digits, ``_`` and ``-``: a part becomes a directory of the
    warehouse, and may not climb out of it.

    Raises:
        InvalidNameError: any other form.
    """
    parts = tuple(identifier.split("."))
    if len(parts) < 2 or not all(_NAME_PART.fullmatch(p) for p in parts):
        raise InvalidNameError(
            f"invalid Iceberg table identifier {identifier!r}: expected NAMESPACE.TABLE, each "
            "part letters, digits, '_' or '-'"
        )
    return parts


def load_or_create(catalog: Catalog, parts: tuple[str, ...], schema: pa.Schema) -> Table:
    from pyiceberg.exceptions import NoSuchTableError, TableAlreadyExistsError
    from sqlalchemy.exc import IntegrityError

    try:
        return catalog.load_table(parts)
    except NoSuchTableError:
        pass
    try:
        catalog.create_namespace_if_not_exists(parts[:-1])
    except IntegrityError:
        # pyiceberg's SQL catalog checks, then inserts: a second exporter that
        # created the namespace in between gets the database's error
        if not catalog.namespace_exists(parts[:-1]):
            raise
    with contextlib.suppress(TableAlreadyExistsError):  # another exporter was first
        return catalog.create_table(parts, schema=schema)
    return catalog.load_table(parts)


# --- pyiceberg's errors as arrowlog's -----------------------------------------------


@contextlib.contextmanager
def mapped(where: str) -> Iterator[None]:
    """pyiceberg's, its catalog's and its FileIO's errors raised inside as arrowlog's."""
    try:
        yield
    except ArrowLogError:
        raise
    except Exception as e:
        if not _is_libraries(e):
            raise
        raise iceberg_error(e, where) from e


def _is_libraries(e: Exception) -> bool:
    module = type(e).__module__.split(".")[0]
    return module in ("pyiceberg", "sqlalchemy", "pyarrow") or isinstance(e, OSError)


def iceberg_error(e: Exception, where: str) -> ArrowLogError:
    """pyiceberg's error as arrowlog's: retriable when a service, the catalog's
    database or the network said to come back later."""
    import requests
    from pyiceberg import exceptions as x
    from sqlalchemy.exc import OperationalError

    text = " ".join(str(e).split()) or type(e).__name__
    if isinstance(e, x.CommitFailedException):
        return ExportConflictError(f"{where}: another commit conflicted: {text}")
    transient = (
        x.ServiceUnavailableError,
        x.ServerError,
        x.TooManyRequestsError,
        x.CommitStateUnknownException,
        x.WaitingForLockException,
        OperationalError,  # SQLite: "database is locked"
        ConnectionError,
        TimeoutError,
        requests.ConnectionError,  # a REST catalog that did not answer
        requests.Timeout,
    )
    return ExportTableError(
        f"{where}: {type(e).__name__}: {text}", retriable=isinstance(e, transient)
    )


__all__ = [
    "CATALOG_FILE",
    "DEFAULT_CATALOG_NAME",
    "CatalogConfig",
    "check_identifier",
    "iceberg_error",
    "load_or_create",
    "mapped",
]
