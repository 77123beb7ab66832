"""``arrowlog doctor URL``: judge a store before a log goes on it
(:mod:`arrowlog.storage.doctor`)."""

from __future__ import annotations

import click

from arrowlog.cli._common import DURATION_EXAMPLE, DURATION_UNITS, with_units
from arrowlog.errors import StoreUnreachableError
from arrowlog.jobs.command_store import RootNotFoundError, is_local, local_path
from arrowlog.jobs.commandline import EXIT_NOT_FOUND, Session, leaf, one_line, with_examples
from arrowlog.storage.doctor import DEFAULT_MAX_CLOCK_SKEW_MS, VERDICT_KEY, examine
from arrowlog.storage.url import open_store

#: ``arrowlog doctor``'s own exit codes (docs/cli.md)
EXIT_SAFE = 0
EXIT_UNSAFE = 1
EXIT_NOT_A_STORE = EXIT_NOT_FOUND


@click.command("doctor")
@click.argument("url", required=False, metavar="[URL]")
@click.option(
    "--record",
    is_flag=True,
    help=f"Keep the verdict in the store ({VERDICT_KEY}, replacing an earlier one): "
    "`topics create` then refuses a store judged unsafe unless --allow-unsafe-store.",
)
@click.option(
    "--max-clock-skew",
    default=f"{DEFAULT_MAX_CLOCK_SKEW_MS // 1000}s",
    show_default=True,
    metavar="DURATION",
    help="How far the store's clock may be from this machine's (like 5s or 500ms).",
)
@leaf(read_only=False)
@with_examples(
    "arrowlog doctor s3://bucket/prefix --endpoint-url http://127.0.0.1:8333",
    "arrowlog doctor /data/log --output json",
    "arrowlog doctor s3://bucket/prefix --record      # topics create refuses it if unsafe",
)
def doctor(session: Session, url: str | None, record: bool, max_clock_skew: str) -> None:
    """Judge the store at URL (default: --root) before a log goes on it.

    Checks put-if-absent (refused when the key exists, the first object
    kept), a race of 4 processes for each of 64 keys (exactly one winner;
    unknown if no two puts of a key were in flight at once), list-after-put
    (listed at once, by prefix, sorted), ranged GETs (also at and past the
    end), pre-signed GETs fetched by plain HTTP (what the JVM
    reader needs; unknown for a store with no URLs), deletes (also of a
    missing key) and the store's clock against this machine's. Each is safe,
    unsafe or unknown, with the reason.

    Everything the doctor writes lives under one fresh prefix,
    _arrowlog/doctor/<uuid>/, and is deleted at the end, also when it fails;
    only --record leaves an object (the verdict). What a killed run left is
    removed by a later run once it is an hour old on the store's clock.

    \b
    Exit codes:
      0  no check found the store unsafe (unknowns say why)
      1  a check found the store unsafe
      2  usage: a bad option, or a URL naming no store arrowlog opens
      3  not a store: unreachable, no object store there, no such bucket or
         directory, access refused; nothing was written
    """
    where = url or session.root
    if not where:
        raise click.UsageError("give a URL (or --root, or ARROWLOG_ROOT)")
    try:
        skew_ms = with_units(max_clock_skew, DURATION_UNITS, DURATION_EXAMPLE)
    except ValueError as e:
        raise click.UsageError(f"--max-clock-skew: {e}") from None
    if is_local(where) and not local_path(where).is_dir():
        path = local_path(where)
        why = "a file, not a directory" if path.exists() else "no such directory"
        raise RootNotFoundError(f"no store at {path}: {why}")
    store = open_store(where, session.options)
    try:
        diagnosis = examine(store, max_clock_skew_ms=skew_ms, record=record)
    except StoreUnreachableError as e:
        click.echo(one_line(e), err=True)
        raise click.exceptions.Exit(EXIT_NOT_A_STORE) from None
    finally:
        store.close()
    if session.output == "json":
        session.json(diagnosis.to_dict())
    else:
        session.table(
            [{"check": c.name, "status": c.status, "reason": c.reason} for c in diagnosis.checks]
        )
    verdict = "safe" if diagnosis.safe else f"unsafe ({', '.join(diagnosis.failed)})"
    session.message(
        f"{diagnosis.url}: {verdict}" + (f"; recorded in {VERDICT_KEY}" if record else "")
    )
    if diagnosis.left_behind:
        session.message(f"could not remove: {', '.join(diagnosis.left_behind)}")
    if not diagnosis.safe:
        raise click.exceptions.Exit(EXIT_UNSAFE)
