"""A blank ``txnAppId`` is refused (option parsing runs without Spark).

Origin: the attack on issue 8's Spark source and sink (was tests/attack/test_issue8_spark.py)."""

from __future__ import annotations

import pytest

from arrowlog.errors import InvalidConfigError
from arrowlog.spark.options import SESSION_APP_ID, SESSION_VERSION, WriteOptions


@pytest.mark.parametrize(
    "options",
    [
        {"txnAppId": "", "txnVersion": "1"},
        {"txnAppId": "   ", "txnVersion": "1"},
        {SESSION_APP_ID: "", SESSION_VERSION: "1"},
    ],
)
def test_blank_txn_app_id_is_refused(options: dict[str, str]) -> None:
    # An empty txnAppId used to be taken as an app id: every such job shared the
    # transactional id "spark." and skipped each other's versions.
    with pytest.raises(InvalidConfigError, match="txnAppId"):
        WriteOptions.parse({"path": "memory://x", "topic": "t", **options})
