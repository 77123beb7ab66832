"""The obstore client against scripted HTTP failures: a small front on 127.0.0.1
passes each request on to SeaweedFS, or answers it itself (a 503, a 500, a
403), or forwards a PUT and then drops the connection before the reply, as a
network does when a reply is lost but the write landed."""

from __future__ import annotations

from collections.abc import Iterator

import pyarrow as pa
import pytest

import arrowlog
from arrowlog.errors import StoreError, TransientStoreError
from arrowlog.storage.objectstore import ObjectStore
from arrowlog.storage.url import open_store
from arrowlog.testing import seaweedfs
from tests.support.s3_front import Answer, Front, xml

pytestmark = pytest.mark.s3


@pytest.fixture
def front(s3_server: seaweedfs.S3Server) -> Iterator[Front]:
    f = Front(s3_server.endpoint)
    yield f
    f.close()


def through(front: Front, server: seaweedfs.S3Server, name: str) -> ObjectStore:
    options = {**server.storage_options, "endpoint_url": front.endpoint}
    store = open_store(server.url(name), options)
    assert isinstance(store, ObjectStore)
    return store


def test_a_put_whose_reply_is_lost_is_already_there_on_retry(
    front: Front, s3_server: seaweedfs.S3Server
) -> None:
    """object_store retries the PUT; the first one landed: the retry is refused
    with 412, and the caller is told "already exists" (never a false success on
    another writer's object: the caller reads the winner to see whose it is)."""
    store = through(front, s3_server, "lost-reply")
    front.script.put(Answer(drop=True, method="PUT"))
    with pytest.raises(FileExistsError):
        store.put_if_absent("k", b"mine")
    assert store.get("k") == b"mine"
    puts = [status for method, _, status in front.seen if method == "PUT"]
    assert puts == ["200, dropped", 412]


def test_an_append_whose_reply_is_lost_lands_exactly_once(
    front: Front, s3_server: seaweedfs.S3Server
) -> None:
    """The schedule of a lost reply, end to end: the segment PUT lands, its reply
    is cut, the retry says 412, and the append must recognise its own segment,
    acknowledge it, and not write it again."""
    schema = pa.schema([("x", pa.int64())])
    log = arrowlog.connect(through(front, s3_server, "lost-append"))
    log.create_topic("t", schema)
    producer = log.producer()
    producer.send("t", pa.record_batch({"x": [1, 2]}, schema=schema))
    front.script.put(Answer(drop=True, method="PUT"))
    producer.send("t", pa.record_batch({"x": [3]}, schema=schema))
    assert any(status == "200, dropped" for _, _, status in front.seen)
    assert log.read("t")["x"].to_pylist() == [1, 2, 3]
    assert log.end_offsets("t") == {0: 3}


@pytest.mark.parametrize(
    ("answer", "retriable", "applied"),
    [
        # object_store retried the 503s: an earlier attempt could have landed
        (Answer(503, xml("SlowDown")), True, True),
        (Answer(409, xml("ConditionalRequestConflict")), True, False),
        (Answer(500, xml("InternalError")), True, True),
        (Answer(403, xml("AccessDenied")), False, False),
        (Answer(400, xml("InvalidArgument")), False, False),
    ],
    ids=["503-slowdown", "409-conflict", "500", "403", "400"],
)
def test_each_failure_of_a_put_maps_to_the_one_error_contract(
    front: Front, s3_server: seaweedfs.S3Server, answer: Answer, retriable: bool, applied: bool
) -> None:
    store = through(front, s3_server, "failures")
    # object_store retries 5xx itself a few times: every attempt gets the answer
    for _ in range(5):
        front.script.put(answer)
    with pytest.raises(StoreError) as info:
        store.put_if_absent("k", b"x")
    error = info.value
    assert error.retriable is retriable, error
    assert "\n" not in str(error)
    if retriable:
        assert isinstance(error, TransientStoreError)
        assert error.maybe_applied is applied
    front.reset()
    with pytest.raises(FileNotFoundError):
        store.head("k")


def test_a_missing_bucket_is_a_store_error_not_a_missing_object(
    s3_server: seaweedfs.S3Server,
) -> None:
    store = open_store("s3://no-such-bucket/p", s3_server.storage_options)
    for request in (lambda: store.get("k"), lambda: list(store.list("p/"))):
        with pytest.raises(StoreError, match="NoSuchBucket: the store's bucket does not exist"):
            request()
