"""The command-line frame every arrowlog program shares: how rows are printed."""

from __future__ import annotations

import pytest

from arrowlog.jobs.commandline import write_csv


def test_csv_rows_with_different_keys_keep_every_value_under_its_column(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """The header is every row's keys in the order first seen, each line a
    field per column (a key the first row lacked shifted no value and lost
    none: it was left out of the header and its value added at the line's end)."""
    write_csv([{"a": 1, "b": None}, {"a": 2, "c": "x"}, {"c": "y", "a": 3}])
    assert capsys.readouterr().out == "a,b,c\n1,,\n2,,x\n3,,y\n"
