"""How every arrowlog program runs from a command line, the ``arrowlog``
command's subcommands (:mod:`arrowlog.cli`) and the jobs run by themselves
(``python -m arrowlog.jobs.backfill``, ``spark-submit spark_jobs/backfill.py``)
alike: the connection options (with environment-variable defaults),
``--output table|json``, one line per error with a documented exit code,
``--debug`` (traceback and store request counts), and a progress bar for long
jobs. It sits in the jobs' layer because the jobs run by themselves need it,
and jobs never import the command line above them.

Exit codes (docs/cli.md):

==== ============================================================
0    success
1    the operation failed (an error not listed below)
2    usage: a bad option, argument, value, store URL or input file
3    not found: topic, partition, group, transactional id, root, bucket
4    corrupt data: a checksum mismatch in a segment or checkpoint
5    the store failed or refused (credentials, permissions)
75   retriable: try again (an undecided transaction, a lost race)
130  interrupted (Ctrl-C); a load or backfill says where to resume
141  the reader of the output went away (``| head``)
==== ============================================================
"""

from __future__ import annotations

import base64
import contextlib
import functools
import inspect
import json
import os
import sys
import traceback
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, ParamSpec, TypeVar

import click
import pyarrow as pa
from rich.console import Console
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    TaskProgressColumn,
    TextColumn,
    TimeElapsedColumn,
    TimeRemainingColumn,
)
from rich.table import Table

import arrowlog
from arrowlog.errors import (
    ArrowLogError,
    CorruptObjectError,
    InvalidBatchError,
    InvalidConfigError,
    InvalidNameError,
    SchemaMismatchError,
    StoreError,
    UnknownTopicOrPartitionError,
    UnsupportedStoreError,
    UnsupportedTypeError,
)
from arrowlog.jobs.command_store import RootNotFoundError, is_local, open_cli_store, parse_options
from arrowlog.storage.wrappers import CountingStore

EXIT_OK = 0
EXIT_FAILED = 1
EXIT_USAGE = 2
EXIT_NOT_FOUND = 3
EXIT_CORRUPT = 4
EXIT_STORE = 5
EXIT_RETRIABLE = 75
EXIT_INTERRUPTED = 130
EXIT_BROKEN_PIPE = 141

Output = Literal["table", "json", "csv"]
P = ParamSpec("P")
R = TypeVar("R")


class NotFoundError(ArrowLogError):
    """A group, transactional id or object named on the command line does not exist."""


def exit_code(error: BaseException) -> int:
    """The documented exit code of an error."""
    if isinstance(error, (UnknownTopicOrPartitionError, RootNotFoundError, NotFoundError)):
        return EXIT_NOT_FOUND
    if isinstance(error, FileNotFoundError) or "NoSuchBucket" in str(error):
        return EXIT_NOT_FOUND
    if isinstance(error, CorruptObjectError):
        return EXIT_CORRUPT
    if isinstance(error, ArrowLogError) and error.retriable:
        return EXIT_RETRIABLE
    if isinstance(error, StoreError):
        return EXIT_STORE
    if isinstance(
        error,
        (InvalidConfigError, InvalidNameError, SchemaMismatchError, InvalidBatchError,
         UnsupportedStoreError, UnsupportedTypeError,
         pa.ArrowInvalid, click.UsageError),
    ):  # fmt: skip
        return EXIT_USAGE
    return EXIT_FAILED


def one_line(error: BaseException) -> str:
    """``arrowlog: <Type>: <message>`` on one line, whatever the message holds."""
    text = " ".join(str(error).split()) or repr(error)
    return f"arrowlog: {type(error).__name__}: {text}"


@dataclass
class Session:
    """The options every command takes, and the connection made from them."""

    root: str | None
    options: dict[str, Any]
    output: Output
    debug: bool
    read_only: bool
    #: The command may create a local root that does not exist (topics create,
    #: load --create); any other command on a missing local root is refused.
    creates_root: bool = False
    _store: CountingStore | None = field(default=None, repr=False)
    _log: arrowlog.ArrowLog | None = field(default=None, repr=False)

    def connect(self) -> arrowlog.ArrowLog:
        """The log at ``--root`` (one connection per command).

        Raises:
            click.UsageError: no root given.
        """
        if self._log is None:
            if not self.root:
                raise click.UsageError("no root: pass --root URL or set ARROWLOG_ROOT")
            self._store = open_cli_store(
                self.root, self.options, read_only=self.read_only, creates_root=self.creates_root
            )
            self._log = arrowlog.connect(self._store, config=_log_config())
        return self._log

    @property
    def requests(self) -> dict[str, int]:
        """Store requests made so far, by operation."""
        return {} if self._store is None else dict(self._store.counts)

    def close(self) -> None:
        if self._log is not None:
            self._log.close()

    # --- output -------------------------------------------------------------------

    def table(self, rows: Sequence[dict[str, Any]], title: str | None = None) -> None:
        """Rows as a table or as a JSON list."""
        if self.output == "json":
            self.json(list(rows))
            return
        if self.output == "csv":
            write_csv(rows)
            return
        print_table(rows, title=title)

    def json(self, value: object) -> None:
        click.echo(json.dumps(value, indent=2, default=json_default))

    def message(self, text: str) -> None:
        """A human sentence: on stdout for tables, on stderr beside JSON (keeps
        the JSON parseable)."""
        click.echo(text, err=self.output != "table")


def write_csv(
    rows: Sequence[dict[str, Any]], *, header: bool = True, columns: Sequence[str] | None = None
) -> None:
    """Rows as CSV on stdout: a header of ``columns`` (default: every row's
    keys, in the order first seen; none if ``header`` is False: rows following
    some already printed), then a line per row. With ``columns``, the header
    is printed for no rows too.

    A null is an empty field and an empty string a quoted one (``""``), as
    PostgreSQL's COPY and Python's ``csv.QUOTE_NOTNULL`` read them; binary is
    base64, lists and mappings JSON (:func:`json_default`); a field with a
    comma, quote or line break is quoted (RFC 4180)."""
    if columns is not None:
        names = list(columns)
    else:
        names = list(dict.fromkeys(k for row in rows for k in row))
    if not names:
        return
    lines = [_csv_line(names)] if header else []
    lines += [_csv_line([row.get(n) for n in names]) for row in rows]
    click.echo("".join(f"{line}\n" for line in lines), nl=False)


def _csv_line(values: Sequence[Any]) -> str:
    # by hand: csv.writer writes None and "" alike (QUOTE_NOTNULL is 3.12+)
    return ",".join(_csv_field(v) for v in values)


def _csv_field(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, bytes):
        text = json_default(value)
    elif isinstance(value, (list, tuple, dict)):
        text = json.dumps(value, default=json_default)
    else:
        text = str(value)
    if text == "" or any(c in text for c in ',"\r\n'):
        return '"' + text.replace('"', '""') + '"'
    return text


def json_default(value: object) -> str:
    """A value JSON has no type for, as text: binary as base64 (its Python
    repr ``b'...'`` is no format), anything else (dates, decimals) as str."""
    if isinstance(value, bytes):
        return base64.b64encode(value).decode("ascii")
    return str(value)


def console(*, err: bool = False) -> Console:
    """A rich console on the current stdout/stderr; wide when piped so that
    tables are not wrapped at 80 columns."""
    stream = sys.stderr if err else sys.stdout
    terminal = stream.isatty()
    return Console(file=stream, width=None if terminal else 4096, soft_wrap=not terminal)


def print_table(rows: Sequence[dict[str, Any]], *, title: str | None = None) -> None:
    if not rows:
        click.echo("(none)")
        return
    table = Table(title=title, box=None, header_style="bold", pad_edge=False)
    columns = list(dict.fromkeys(k for row in rows for k in row))
    for name in columns:
        table.add_column(name.upper().replace("_", "-"), overflow="fold")
    for row in rows:
        table.add_row(*(_cell(row.get(c)) for c in columns))
    console().print(table)


def _cell(value: object) -> str:
    if value is None:
        return "-"
    if isinstance(value, bytes):
        return json_default(value)
    if isinstance(value, (list, tuple, dict)):
        return json.dumps(value, default=json_default)
    return str(value)


def _log_config() -> arrowlog.LogConfig:
    """The client settings: ``ARROWLOG_METADATA_MAX_AGE_MS`` sets how long a
    topic's version is trusted (it must match the other clients of the bucket:
    re-creating a deleted topic waits that long)."""
    raw = os.environ.get("ARROWLOG_METADATA_MAX_AGE_MS")
    if raw is None:
        return arrowlog.LogConfig()
    try:
        value = int(raw)
    except ValueError:
        raise click.UsageError(
            f"ARROWLOG_METADATA_MAX_AGE_MS must be an integer (milliseconds), not {raw!r}"
        ) from None
    return arrowlog.LogConfig(metadata_max_age_ms=value)


# --- options shared by every command ----------------------------------------------

_COMMON: list[Callable[[Callable[..., Any]], Callable[..., Any]]] = [
    click.option(
        "--root", envvar="ARROWLOG_ROOT", show_envvar=True, metavar="URL",
        help="The log: a directory, file:///dir, s3://bucket/prefix or memory://.",
    ),
    click.option(
        "--endpoint-url", envvar="ARROWLOG_ENDPOINT_URL", show_envvar=True, metavar="URL",
        help="S3 endpoint (MinIO, SeaweedFS). Credentials come from AWS_ACCESS_KEY_ID, "
        "AWS_SECRET_ACCESS_KEY, AWS_DEFAULT_REGION, AWS_PROFILE or ~/.aws, as the AWS "
        "CLI finds them.",
    ),
    click.option(
        "--option", "-o", "option", multiple=True, metavar="KEY=VALUE",
        help="A storage option (repeatable): true/false, ints and JSON are converted.",
    ),
    click.option(
        "--storage-options", envvar="ARROWLOG_STORAGE_OPTIONS", show_envvar=True,
        metavar="JSON", help="Storage options as one JSON object.",
    ),
    click.option(
        "--output", type=click.Choice(["table", "json", "csv"]), default="table",
        envvar="ARROWLOG_OUTPUT", show_default=True,
        help="How results are printed (csv: a header line, then one line per row).",
    ),
    click.option(
        "--debug", is_flag=True, envvar="ARROWLOG_DEBUG",
        help="Tracebacks on errors; store request counts on stderr.",
    ),
]  # fmt: skip


def leaf(
    *,
    read_only: bool | Callable[[dict[str, Any]], bool],
    creates_root: bool | Callable[[dict[str, Any]], bool] = False,
) -> Callable[[Callable[..., None]], Callable[..., None]]:
    """Give a command the shared options and the error handling. The command
    receives a :class:`Session` as its first argument. A ``read_only`` command's
    store refuses every write, and it never creates a local directory;
    ``read_only`` may decide from the command's own arguments (a dry run)."""

    def wrap(fn: Callable[..., None]) -> Callable[..., None]:
        @functools.wraps(fn)
        def run(
            root: str | None,
            endpoint_url: str | None,
            option: tuple[str, ...],
            storage_options: str | None,
            output: Output,
            debug: bool,
            **kwargs: Any,
        ) -> None:
            debug = debug or bool(click.get_current_context().find_root().params.get("debug"))
            session: Session | None = None
            with handled(debug, lambda: session):
                session = Session(
                    root=root,
                    options=parse_options(option, storage_options, endpoint_url),
                    output=output,
                    debug=debug,
                    read_only=read_only(kwargs) if callable(read_only) else read_only,
                    creates_root=(creates_root(kwargs) if callable(creates_root) else creates_root),
                )
                try:
                    fn(session, **kwargs)
                finally:
                    session.close()

        for decorate in reversed(_COMMON):
            run = decorate(run)
        return run

    return wrap


@contextlib.contextmanager
def handled(debug: bool, session: Callable[[], Session | None]) -> Iterator[None]:
    """Turn an error into one line on stderr and its exit code (click's ``Exit``)."""
    try:
        yield
    except BrokenPipeError:
        # the reader went away (`| head`): quietly, with the shell's code for it
        raise click.exceptions.Exit(EXIT_BROKEN_PIPE) from None
    except (click.exceptions.Exit, click.exceptions.Abort, KeyboardInterrupt):
        raise
    except click.UsageError:
        raise
    except Exception as e:  # noqa: BLE001 - every error becomes one line and a code
        if debug:
            traceback.print_exc()
        click.echo(one_line(e) + _hint(e, session()), err=True)
        raise click.exceptions.Exit(exit_code(e)) from None
    finally:
        current = session()
        if debug and current is not None:
            counts = " ".join(f"{k}={v}" for k, v in sorted(current.requests.items()))
            click.echo(f"arrowlog: store requests: {counts or 'none'}", err=True)


def _hint(error: BaseException, session: Session | None) -> str:
    """What to check when a remote store answers "not found" to the root itself:
    a wrong endpoint (any HTTP server answers 404) or a missing bucket."""
    root = None if session is None else session.root
    if root is None or not isinstance(error, FileNotFoundError):
        return ""
    if is_local(root) or root.startswith("memory:"):
        return ""
    return f" (not found at {root}: check the endpoint URL and that the bucket exists)"


def examples(*lines: str) -> str:
    """An Examples section for a command's help (``\\b`` keeps click from
    re-wrapping the lines)."""
    return "\n\n\b\nExamples:\n" + "\n".join(f"  {line}" for line in lines)


def with_examples(*lines: str) -> Callable[[Callable[P, R]], Callable[P, R]]:
    """Append an Examples section to the decorated command's docstring."""

    def wrap(fn: Callable[P, R]) -> Callable[P, R]:
        fn.__doc__ = inspect.cleandoc(fn.__doc__ or "") + examples(*lines)
        return fn

    return wrap


def json_object(option: str, text: str | None) -> dict[str, object] | None:
    """An option's JSON object (None when not given).

    Raises:
        InvalidConfigError: not a JSON object.
    """
    if text is None:
        return None
    try:
        value = json.loads(text)
    except ValueError as e:
        raise arrowlog.InvalidConfigError(f"{option}: not valid JSON: {e}") from None
    if not isinstance(value, dict):
        raise arrowlog.InvalidConfigError(f"{option} must be a JSON object")
    return value


# --- long jobs -----------------------------------------------------------------------


@contextlib.contextmanager
def progress_bar(total: int | None, unit: str, *, enabled: bool) -> Iterator[Progress]:
    """One bar on stderr: done/total, percentage, elapsed and ETA. Live on a
    terminal; otherwise (a log file, a test) printed once when the job is done.
    On an error the bar goes away: the error's one line says it all."""
    err = console(err=True)
    live = enabled and err.is_terminal
    bar = Progress(
        TextColumn("[bold]{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TaskProgressColumn(),
        TimeElapsedColumn(),
        TextColumn("ETA"),
        TimeRemainingColumn(),
        console=err,
        disable=not live,
    )
    bar.add_task(unit, total=total)
    bar.start()
    try:
        yield bar
    except BaseException:
        bar.live.transient = True
        raise
    finally:
        bar.stop()
    if enabled and not live:
        err.print(bar.get_renderable())


def interrupted(where: str) -> click.exceptions.Exit:
    """Ctrl-C in a job: where to resume, and the exit code for it."""
    click.echo(f"interrupted at {where}; rerun to resume", err=True)
    return click.exceptions.Exit(EXIT_INTERRUPTED)


# --- running a program ---------------------------------------------------------------

#: how every arrowlog program's help reads
CONTEXT_SETTINGS: dict[str, Any] = {
    "help_option_names": ["-h", "--help"],
    "max_content_width": 100,
}


def run(command: click.Command, argv: list[str] | None) -> int:
    """Run ``command`` (the ``arrowlog`` group, or a job's command under a
    group of that name) as a program; returns the exit code (docs/cli.md)."""
    try:
        code = command.main(args=argv, prog_name="arrowlog", standalone_mode=False)
    except click.exceptions.Exit as e:
        code = e.exit_code
    except click.ClickException as e:
        # one line, like every other error: click's own form takes four
        where = e.ctx.command_path if isinstance(e, click.UsageError) and e.ctx else "arrowlog"
        hint = f" (see {where} --help)" if isinstance(e, click.UsageError) else ""
        click.echo(f"{where}: error: {' '.join(e.format_message().split())}{hint}", err=True)
        code = EXIT_USAGE
    except (click.exceptions.Abort, KeyboardInterrupt):
        click.echo("interrupted", err=True)
        code = EXIT_INTERRUPTED
    except BrokenPipeError:
        code = EXIT_BROKEN_PIPE
    if code == EXIT_BROKEN_PIPE or _stdout_closed():
        # The reader went away (`| head`): silence the flush at exit, which
        # would print a BrokenPipeError of its own.
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return EXIT_BROKEN_PIPE
    return int(code or 0)


def run_job(command: click.Command, name: str, argv: list[str] | None = None) -> int:
    """A job's command run by itself (``python -m arrowlog.jobs.<job>``,
    ``spark-submit spark_jobs/<job>.py``) exactly as ``arrowlog <name>`` runs
    it; the root may come first, as the jobs' own calling convention has it:
    ``ROOT ARGS...`` is ``ARGS... --root ROOT``."""
    args = list(sys.argv[1:] if argv is None else argv)
    group = click.Group("arrowlog", commands={name: command}, context_settings=CONTEXT_SETTINGS)
    if not args or args[0].startswith("-"):
        return run(group, [name, *args])  # --help, or a usage error from click
    return run(group, [name, "--root", args[0], *args[1:]])


def _stdout_closed() -> bool:
    try:
        sys.stdout.flush()
    except BrokenPipeError:
        return True
    except (OSError, ValueError):
        return False
    return False
