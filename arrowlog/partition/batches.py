"""Appending a stream of batches with the next one encoded while the one
before is on the wire.

One append is CPU work (checks, statistics, encoding, checksums), then a PUT
that leaves the CPU idle. Done one after the other, each append pays both in
full, and the CPU work costs more than it would warm: measured here, encoding
a 64 KiB batch took 0.12 ms in a tight loop and 0.41 ms after a 2.5 ms pause,
about what a PUT leaves. So while a batch's PUT is in flight (on a thread: the
store's client releases the GIL), the next batch is checked and encoded for
the offset it will likely take. The appends themselves stay one at a time and
in order; nothing about where a batch lands changes: a batch encoded for an
offset the log no longer ends at is encoded again (:meth:`Appends._append`).
"""

from __future__ import annotations

from collections.abc import Generator, Iterable
from concurrent.futures import Future, ThreadPoolExecutor

import pyarrow as pa

from arrowlog.partition.append import AppendResult, Appends
from arrowlog.segment import PLAIN_APPEND


class BatchAppends(Appends):
    """:meth:`append_batches`."""

    def append_batches(
        self,
        batches: Iterable[pa.RecordBatch | pa.Table],
        *,
        expected_offset: int | None = None,
    ) -> Generator[AppendResult, None, None]:
        """Append ``batches`` in order, one segment each, as :meth:`append`
        would one after the other, and yield each result once its batch landed.
        While one batch is written, the next is checked and encoded (module
        docstring): for a stream of batches, the store's round trips come close
        to back to back.

        With ``expected_offset``, the first batch lands exactly there and each
        next exactly where the one before ended, or not at all (a bulk load:
        see :func:`arrowlog.bulkload.bulk_load`); without, each lands at the log
        end, after whatever other writers appended meanwhile.

        Nothing is written before the first result is asked for. An error stops
        the stream where it occurs, as in a loop of :meth:`append`: the batches
        before it are written and their results yielded first, none after it
        is. Closing the iterator early never leaves a write in flight.

        Raises:
            as :meth:`append`, for the batch that failed.
        """
        self.check_expected_offset(expected_offset)
        given = iter(batches)
        with ThreadPoolExecutor(1, thread_name_prefix="arrowlog-append") as pool:
            flight: Future[AppendResult] | None = None
            at = expected_offset  # where the next batch must land (None: the end)
            likely = self._end if at is None else at  # where it will likely land
            while True:
                try:
                    batch = next(given, None)  # the caller's iterator may fail too
                    if batch is not None:
                        batch = self.prepare_batch(batch)
                except Exception:
                    if flight is not None:
                        yield flight.result()  # its own error first, as a loop would
                    raise
                if batch is None:
                    break
                ahead = self.encode_ahead(batch, likely)
                if flight is not None:
                    landed = flight.result()
                    yield landed
                    likely = landed.next_offset
                    if at is not None:
                        at = landed.next_offset
                flight = pool.submit(self._append, batch, at, PLAIN_APPEND, ahead)
                likely += batch.num_rows
            if flight is not None:
                yield flight.result()
