"""The demo job refuses a row count that is not a whole number above zero in
one usage line (exit 2), before it generates or writes anything."""

from __future__ import annotations

from pathlib import Path

import pytest

from arrowlog.jobs import demo


@pytest.mark.parametrize(
    ("flag", "value"), [("--rows", "-5"), ("--rows", "0"), ("--rows-per-batch", "x")]
)
def test_a_bad_row_count_is_a_usage_error_that_writes_nothing(
    flag: str, value: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    root, data = tmp_path / "store", tmp_path / "data" / "events.parquet"
    with pytest.raises(SystemExit) as exited:
        demo.main(["--root", str(root), "--data", str(data), flag, value])
    assert exited.value.code == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert "error" in err[-1] and flag in err[-1]
    assert not root.exists() and not data.exists()
