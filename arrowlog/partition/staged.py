"""Staged appends: under contention a batch is uploaded once to a key of its
own, and committed by a small commit object at the log end that names it;
whoever wins the next offset commits every staged batch it can see, in one
put-if-absent. So many writers of one partition help each other instead of
racing one upload per offset (flat combining over an object store; the
upload-then-commit shape of Kafka's KIP-1163). See docs/protocol.md,
"Staged appends".

Why no batch is committed twice: every staged batch is a producer's (a
plain append's is staged under a producer id this client claims for its
staged appends), a commit object at offset N is put only by a writer that
knew the chain below N, and a writer commits another's batch only if it is
the next of its producer's sequence in that chain: once committed, it never
is again. A commit put at N after another landed there fails.
"""

from __future__ import annotations

import collections
import os
import time
import uuid

import pyarrow as pa

from arrowlog import _clock
from arrowlog.config import Compression
from arrowlog.errors import (
    AppendOutcomeUnknownError,
    DuplicateSequenceError,
    ProducerFencedError,
    RecordBatchTooLargeError,
    StoreError,
    TransientStoreError,
)
from arrowlog.format.checkpoint import SegmentSummary
from arrowlog.format.segment import Ref, SegmentHeader, WriterIdentity, empty_batch, encode
from arrowlog.format.topic import (
    StagedName,
    parse_staged_name,
    partition_dir,
    staged_at,
    staged_folder,
)
from arrowlog.partition._base import Shared
from arrowlog.partition.append_result import AppendResult
from arrowlog.partition.checkpoints import Checkpoints
from arrowlog.partition.claims import Claims, Owner
from arrowlog.partition.known import KnownLog
from arrowlog.partition.listing import Listing
from arrowlog.partition.producer_ids import claim_producer_id
from arrowlog.partition.reads import Reads
from arrowlog.partition.sequences import MAX_REFS, Sequences
from arrowlog.storage import ObjectInfo

#: a writer that lost a race within this many seconds stages its next batch
#: at once, without trying the log end first
CONTENDED_S = 2.0
#: how many bytes more than ``max_batch_bytes`` a staged object may have: its
#: header says it is staged and carries a producer id where a plain segment's
#: has none (in the schema message and its copy in the footer, padded), and a
#: batch that fits as a segment must not be refused for losing a race
STAGED_SLACK = 256
#: a writer that has not lost a race lately looks for others' staged batches
#: this often (seconds)
LOOK_EVERY_S = 0.1
#: a writer helps objects staged in the last this many ms of the writers'
#: clocks (older ones its LIST would not reach; their writers commit them)
HELP_WITHIN_MS = 1_000
#: a LIST of the staged objects starts this many ms before the oldest object
#: the writer's last LIST showed and no commit it knows names (or, if none,
#: before the newest it showed): an upload stamped earlier may land later. A
#: LIST that went back the whole help window would return every object
#: committed in it, and parsing them all costs the writers more than the
#: store.
LIST_SLACK_MS = 50
#: a writer whose batch is not the oldest of those staged waits this long for
#: the oldest's writer to commit it, looking at the log every POLL_S, before
#: it commits itself (that writer may be paused or gone)
PATIENCE_S = 0.25
POLL_S = 0.003
#: a writer that commits gathers others' batches, listing every
#: GATHER_POLL_S, until it sees as many as its last commits carried, or for
#: GATHER_S at most: the writers it helped upload their next batch only once
#: they saw that commit, a moment after it did
GATHER_S = 0.02
GATHER_POLL_S = 0.001
#: ... or for this many times as long as this writer's uploads take, if longer
GATHER_UPLOADS = 4
#: a follower first looks at the log this share of its usual wait after its
#: upload (each look is a request, and the waiting writers are many)
LAG_SHARE = 0.7


class Staged:
    """The staged-append part. It owns when this process last lost a race;
    it runs with the partition's lock held by its caller (Appends)."""

    def __init__(
        self,
        shared: Shared,
        known: KnownLog,
        listing: Listing,
        checkpoints: Checkpoints,
        claims: Claims,
        reads: Reads,
        stats: collections.Counter[str],
    ) -> None:
        self._shared = shared
        self._known = known
        self._listing = listing
        self._checkpoints = checkpoints
        self._claims = claims
        self._reads = reads
        self._stats = stats
        self._lost_at = -1e9
        self._looked_at = -1e9
        self._finished_at = -1e9  # when this writer's last append ended
        # the producer id this client stages its plain appends under, and the
        # sequence of the next: never given twice, whatever became of a batch
        self._plain_id: int | None = None
        self._plain_pid = 0  # the process that claimed it
        self._plain_sequence = 0
        # whether another writer committed this writer's last staged batch:
        # it then waits for that writer's next commit before listing
        self._follows = False
        # how many batches this writer's last two commits carried: what a
        # commit waits to gather
        self._carried = collections.deque([1], maxlen=2)
        # where the next LIST of the staged objects starts (writer's ms)
        self._list_from_ms = 0
        # how long after its upload a follower's batch is usually seen
        # committed (a moving average, seconds): it looks at the log first a
        # little before that, not every POLL_S from the upload on
        self._lag_s = 0.0
        # how long a commit's gathering usually takes, and this writer's
        # uploads (moving averages, s)
        self._fill_s = 0.0
        self._upload_s = 0.0

    def contended(self) -> bool:
        """Whether this writer should stage its next batch: it lost a race
        for the end a moment ago, or others' staged batches wait to be
        committed. A writer that wins every race (it knows the end it just
        wrote, so it is always first there) would otherwise never see that
        others stage behind it, and never commit their batches: so every
        :data:`LOOK_EVERY_S` it lists the staged objects (one LIST), while
        it appends without a pause that long."""
        now = _clock.elapsed()
        if now - self._lost_at < CONTENDED_S:
            return True
        if now - self._finished_at > LOOK_EVERY_S:
            # a writer that appends now and then leaves the end free between
            # its appends (others' commits land there): only one that appends
            # without pause can keep them out, and only it pays for a look,
            # the first LOOK_EVERY_S into its run
            self._looked_at = now
            return False
        if now - self._looked_at < LOOK_EVERY_S:
            return False
        self._looked_at = now
        try:
            helpable = self._helpable(None, once=True)
        except StoreError:
            # only a hint, whether the store may answer later or refuses
            # (no LIST allowed on staged/): the append meets the store itself
            return False
        if helpable:
            self._lost_at = now
            return True
        return False

    def finished(self) -> None:
        """An append of this writer ended, whatever its outcome."""
        self._finished_at = _clock.elapsed()

    def lost_race(self) -> None:
        self._lost_at = _clock.elapsed()

    def append(
        self, batch: pa.RecordBatch, identity: WriterIdentity, append_id: str
    ) -> AppendResult:
        """Stage ``batch`` and see it committed, by this writer or another.

        Raises:
            RecordBatchTooLargeError: the staged object would be too large.
            AppendOutcomeUnknownError: the deadline passed before the batch was
                seen committed; it may still be, by another writer.
        """
        since = self._known.end  # the batch cannot be committed below this
        if identity.producer_id < 0:
            identity = self._plain_identity(batch.num_rows)
        began = _clock.elapsed()
        try:
            mine = self._upload(batch, identity, append_id)
            self._upload_s += (_clock.elapsed() - began - self._upload_s) / 4
        except TransientStoreError as e:
            if not e.maybe_applied:
                raise
            raise self._unknown(f"its upload may have landed: {e}", since) from e
        self._stats["staged"] += 1
        try:
            return self._see_committed(mine, batch.num_rows, since)
        except TransientStoreError as e:
            # the object is staged: another writer may commit it whatever happens here
            raise self._unknown(str(e), since) from e

    def _plain_identity(self, count: int) -> WriterIdentity:
        """The identity a plain append is staged under: this client's own
        producer id (claimed once) and the next sequence, so that helpers
        can tell it committed as they tell an idempotent producer's batch.
        A sequence is never given again: a batch whose outcome was unknown
        keeps its own, and the next batch goes past it. A process forked
        from this one (a multiprocessing pool) claims an id of its own: the
        copy of the parent's id and sequence it inherits would give the same
        identity to two batches."""
        if self._plain_id is None or self._plain_pid != os.getpid():
            shared = self._shared
            self._plain_id = claim_producer_id(shared.store, None, shared.config.retry)
            self._plain_pid = os.getpid()
            self._plain_sequence = 0
        who = WriterIdentity(
            producer_id=self._plain_id, producer_epoch=0, base_sequence=self._plain_sequence
        )
        self._plain_sequence += count
        return who

    def _wait_for_growth(self, patience: float, first: float = POLL_S) -> int:
        """Follow the log until it grows, or for ``patience`` seconds: a read
        of the key at the end each time (a LIST of the tail is dearer, and
        the writers waiting are many), the first after ``first`` seconds,
        then every :data:`POLL_S`. How many reads found nothing."""
        until = _clock.elapsed() + patience
        end = self._known.end
        pause = min(max(first, POLL_S), patience)
        misses = 0
        while _clock.elapsed() < until:
            time.sleep(pause)
            pause = POLL_S
            self._listing.probe_tail()
            if self._known.end > end:
                return misses
            misses += 1
        return misses

    def _unknown(self, why: str, since: int) -> AppendOutcomeUnknownError:
        return AppendOutcomeUnknownError(
            f"{self._shared.name}: a staged batch may still be committed by a writer: {why}",
            offset=since,
        )

    def _see_committed(self, mine: Ref, count: int, since: int) -> AppendResult:
        """Wait for ``mine`` to be committed, by another writer or by a
        commit of this one.

        Who commits: a writer whose last batch another committed (a
        *follower*) waits for the log to grow, and looks whether the commit
        names its batch; the writer that committed last (the *combiner*: it
        knows the end it wrote and uploads first) gathers the batches staged
        meanwhile and commits them with its own. Which writer commits
        matters only for speed: any writer may commit any batch it may help.
        A follower whose batch the next commit does not carry, or that sees
        no commit for :data:`PATIENCE_S`, commits itself (it uploaded too
        late for that commit; the combiner may be paused or gone).
        """
        sleeps = self._shared.config.retry.sleeps()
        staged_at_s = _clock.elapsed()
        follow = followed = self._follows
        misses = -1  # of the first wait for a commit
        while True:
            landed = self._landed(mine, since)
            if landed is not None:
                if misses == 0:
                    # the first read found the commit: it may have been there
                    # a while (a wait measured so would only ever grow, as
                    # each wait begins later): look earlier next time
                    self._lag_s *= 0.8
                elif misses > 0:
                    lag = _clock.elapsed() - staged_at_s
                    self._lag_s += (lag - self._lag_s) / 4
                self._follows = True
                self._lost_at = _clock.elapsed()  # others commit: the partition is contended
                return AppendResult(self._shared.topic.name, self._shared.partition, landed, count)
            patience = staged_at_s + PATIENCE_S - _clock.elapsed()
            if follow and patience > 0:
                # one commit: if it does not carry this batch, this writer
                # commits (it uploaded after that commit's writer listed)
                self._stats["waits"] += 1
                waited = _clock.elapsed() - staged_at_s
                missed = self._wait_for_growth(patience, first=LAG_SHARE * self._lag_s - waited)
                misses = missed if misses < 0 else misses
                follow = False
                continue
            helped = self._helpable(mine) if followed else None
            if helped and helped[0].at < mine.at and patience > 0:
                # a follower the last commit did not carry: the writer of an
                # older staged batch (the combiner's, or another such
                # follower's) commits now, with this one if it saw it: wait
                # for the log to grow rather than race that commit with the
                # same batches. The combiner never waits so: the writers of
                # older batches may all be followers waiting for it.
                self._stats["waits"] += 1
                self._wait_for_growth(patience)
                continue
            if patience <= 0:
                self._stats["impatient"] += 1
            helped = self._gather(mine, helped)
            owner = self._commit((mine, *helped))
            if owner is Owner.OURS:
                self._follows = False
                self._carried.append(1 + len(helped))
                if helped:
                    self._lost_at = _clock.elapsed()
                if len(helped) == MAX_REFS - 1:
                    self._commit_rest()
                return AppendResult(
                    self._shared.topic.name, self._shared.partition, self._committed_at(mine), count
                )
            if owner is Owner.THEIRS:
                follow = True  # another writer commits: its next commit may carry this batch
                staged_at_s = _clock.elapsed()
                continue
            pause = next(sleeps, None)
            if pause is None:
                raise self._unknown(f"{mine.at} not seen committed before the deadline", since)
            time.sleep(pause)

    def _gather(self, mine: Ref, helped: list[Ref] | None) -> list[Ref]:
        """The batches a commit of ``mine`` may help (``helped``, if listed
        already), listed until there are as many as this writer's last
        commits carried, or for :data:`GATHER_S`. The first LIST waits for
        most of the time such a gathering took before (the others' uploads
        take that long; each LIST is a request)."""
        began = _clock.elapsed()
        want = min(max(self._carried) - 1, MAX_REFS - 1)
        if helped is None:
            if want > 0:
                time.sleep(min(GATHER_S, LAG_SHARE * self._fill_s))
            helped = self._helpable(mine)
        # the writers helped see the commit (a read) and upload: a few of
        # this store's round trips, however slow they are
        limit = max(GATHER_S, GATHER_UPLOADS * self._upload_s)
        while len(helped) < want and _clock.elapsed() < began + limit:
            self._stats["gather_lists"] += 1
            time.sleep(GATHER_POLL_S)
            helped = self._helpable(mine)
        if want > 0 and len(helped) >= want:
            self._fill_s += (_clock.elapsed() - began - self._fill_s) / 4
        return helped

    def _upload(self, batch: pa.RecordBatch, identity: WriterIdentity, append_id: str) -> Ref:
        shared = self._shared
        now = int(time.time() * 1000)
        name = StagedName(
            now, append_id, batch.num_rows, identity.producer_id, identity.producer_epoch,
            identity.base_sequence, identity.transactional,
        )  # fmt: skip
        at = staged_at(name)
        header = SegmentHeader(
            base_offset=0, record_count=batch.num_rows, timestamp_ms=now, append_id=append_id,
            identity=identity, staged=True,
        )  # fmt: skip
        data, header = encode(batch, header, shared.topic.config.compression, stats=True)
        limit = shared.topic.config.max_batch_bytes
        if len(data) > limit + STAGED_SLACK:
            raise RecordBatchTooLargeError(
                f"batch encodes to {len(data)} bytes, over the topic's max_batch_bytes "
                f"({limit}); split it"
            )
        key = partition_dir(shared.topic.prefix, shared.partition) + at
        self._put_staged(key, data)
        return Ref(
            at=at, record_count=batch.num_rows, size=len(data), timestamp_ms=now,
            append_id=append_id, identity=identity, stats=header.stats,
        )  # fmt: skip

    def _put_staged(self, key: str, data: memoryview) -> None:
        """Put a staged object, retrying until the deadline. Its key is its
        own (the append id is in it): "exists" is an earlier attempt landed.

        Raises:
            TransientStoreError: it did not land; ``maybe_applied`` if any
                attempt may have (a later one failing surely does not undo it).
        """
        sleeps = self._shared.config.retry.sleeps()
        uncertain = False
        while True:
            try:
                self._shared.store.put_if_absent(key, data)
                return
            except FileExistsError:
                return
            except TransientStoreError as e:
                uncertain = uncertain or e.maybe_applied
                pause = next(sleeps, None)
                if pause is None:
                    raise TransientStoreError(
                        f"{key}: store unavailable until the deadline: {e}",
                        maybe_applied=uncertain,
                    ) from e
                time.sleep(pause)

    def _landed(self, mine: Ref, since: int) -> int | None:
        """The offset a commit gave ``mine``, if the chain known has one; for
        an idempotent producer's batch, the offset of the batch of the same
        identity the chain holds (a resend staged anew while an earlier copy,
        staged by an attempt whose outcome was unknown, waited: whichever is
        committed first is the batch).

        Raises:
            DuplicateSequenceError, ProducerFencedError: the producer's latest
                batch in the chain is past this one: it can never be committed.
        """
        committed = self._known.committed
        base = committed.at.get(mine.at)
        if base is not None:
            return base
        if mine.identity.producer_id >= 0:
            same = self._same_sequence(mine)
            if same is not None:
                return same
        if committed.since is not None and committed.since <= since:
            return None
        # the index does not reach back to where the batch was staged
        # from the log start if records were deleted past where it was staged
        for s in self._reads.summaries(max(since, self._known.log_start), self._known.end):
            if s.at == mine.at:
                return s.base
        return None

    def _same_sequence(self, mine: Ref) -> int | None:
        who = mine.identity
        state = self._known.tail_state()
        latest = state.producers.get(who.producer_id)
        if latest is None or latest.producer_epoch < who.producer_epoch:
            return None
        if latest.producer_epoch > who.producer_epoch:
            raise ProducerFencedError(
                f"producer {who.producer_id} epoch {who.producer_epoch} is older than epoch "
                f"{latest.producer_epoch} already in {self._shared.name}"
            )
        if latest.base_sequence == who.base_sequence and latest.record_count == mine.record_count:
            return latest.base_offset
        if latest.last_sequence >= who.base_sequence:
            raise DuplicateSequenceError(
                f"producer {who.producer_id} sequence {who.base_sequence} in {self._shared.name} "
                f"was written before (latest batch: sequences {latest.base_sequence}.."
                f"{latest.last_sequence})"
            )
        return None

    def _committed_at(self, mine: Ref) -> int:
        return self._known.committed.at[mine.at]

    def _commit_rest(self) -> None:
        """After a commit that named as many batches as one may: commit the
        batches still waiting, at the end this writer just wrote, until none
        is left or another writer's object takes the end (their writers, or
        the next commit, carry them then). Its own batch is committed: a
        store failing now leaves the rest staged, and is not this append's."""
        while True:
            try:
                rest = self._helpable(None)
                if not rest or self._commit(tuple(rest), own=False) is not Owner.OURS:
                    return
            except TransientStoreError:
                return
            if len(rest) < MAX_REFS - 1:
                return

    def _commit(self, refs: tuple[Ref, ...], *, own: bool = True) -> Owner:
        """Put a commit object of ``refs`` (the first this writer's own
        batch, if ``own``; the others those it helps) at the known end; who
        holds that offset afterwards (NOBODY: try again)."""
        shared, known = self._shared, self._known
        offset = known.end
        header = SegmentHeader(
            base_offset=offset, record_count=sum(r.record_count for r in refs),
            timestamp_ms=int(time.time() * 1000), append_id=uuid.uuid4().hex, refs=refs,
        )  # fmt: skip
        data, header = encode(empty_batch(shared.topic.schema), header, Compression.NONE)
        began = _clock.elapsed()
        owner, maybe_applied = self._claims.try_put(offset, data, header.append_id)
        if maybe_applied:
            self._stats["ambiguous"] += 1
        summary = SegmentSummary.of(header, len(data))
        if self._claims.below_log_start(owner, summary):
            self._stats["below_log_start"] += 1
            self._checkpoints.reopen()
            return Owner.NOBODY
        if owner is Owner.OURS:
            self._stats["commits"] += 1
            self._stats["helped"] += len(refs) - own
            known.end_seen(began)
            self._claims.record_append(summary)
            return owner
        if owner is Owner.THEIRS:
            self._stats["conflicts"] += 1
            self._listing.sync_tail()
            if known.end <= offset:
                self._listing.probe_tail()
        return owner

    def _helpable(self, mine: Ref | None, *, once: bool = False) -> list[Ref]:
        """The staged objects of other writers that this commit may carry:
        listed in the last :data:`HELP_WITHIN_MS`, not transactional, and the
        next batch of their producer's sequence in the chain known (so never
        one committed already: its producer's latest is it, or past it)."""
        committed = self._known.committed
        shared = self._shared
        home = partition_dir(shared.topic.prefix, shared.partition)
        producers = Sequences(self._known)
        out: list[Ref] = []
        pending_ms: int | None = None  # the oldest listed that may wait for a helper
        newest_ms: int | None = None
        newest_own_ms: int | None = None
        for info in self._recent(once):
            name = parse_staged_name(info.key)
            at = info.key[len(home) :]
            if name is None:
                continue
            if mine is not None and name.producer_id == mine.identity.producer_id:
                # this writer's own: it never helps them, and dates the next
                # LIST by them only if no other writer's are listed (its
                # clock may be ahead of theirs)
                newest_own_ms = name.writer_ms
                continue
            newest_ms = name.writer_ms
            if (
                name.transactional
                or (mine is not None and at == mine.at)
                or at in committed.at
                or name.producer_id < 0
            ):
                continue
            if pending_ms is None:
                pending_ms = name.writer_ms
            if not producers.next_of(name, mine):
                continue
            who = WriterIdentity(
                producer_id=name.producer_id, producer_epoch=name.producer_epoch,
                base_sequence=name.base_sequence,
            )  # fmt: skip
            ref = Ref(
                at=at, record_count=name.record_count, size=info.size,
                timestamp_ms=name.writer_ms, append_id=name.append_id, identity=who,
            )  # fmt: skip
            out.append(ref)
            if len(out) == MAX_REFS - 1:
                break
        floor = next((ms for ms in (pending_ms, newest_ms, newest_own_ms) if ms is not None), None)
        if floor is not None:
            # never past this writer's own clock: a writer whose clock is
            # ahead would otherwise hide the batches of all the others
            now = int(time.time() * 1000)
            self._list_from_ms = min(floor, now) - LIST_SLACK_MS
        return out

    def _recent(self, once: bool = False) -> list[ObjectInfo]:
        """The objects staged in the partition in the last
        :data:`HELP_WITHIN_MS` of the writer's clock, from where the last
        LIST showed the oldest that waits (see :data:`LIST_SLACK_MS`), in key
        order; asked ``once`` (no retry), or until the deadline."""
        shared = self._shared
        now = int(time.time() * 1000)
        start = max(now - HELP_WITHIN_MS, self._list_from_ms)
        found: list[ObjectInfo] = []
        folders = dict.fromkeys(
            staged_folder(shared.topic.prefix, shared.partition, ms) for ms in (start, now)
        )
        for folder in folders:
            after = f"{folder}{start:013d}"

            def listed(f: str = folder, a: str = after) -> list[ObjectInfo]:
                return list(shared.store.list(f, start_after=a))

            found.extend(listed() if once else shared.retry(listed))
        return found
