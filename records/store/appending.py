"""The fenced, exactly-once append: ``Log.append`` and ``Log.append_group``.

An append commits only on top of the version it read, and carries the new last offset as the app
transaction ``kraftlake.offset``: a commit that loses the race deletes the file it wrote, follows
the commits it lost to and tries again. A batch with a producer and a sequence also sets the
producer's app transactions (its sequence, where the batch landed), from which a batch sent
again is answered with its original offsets instead of being written twice.
"""

from __future__ import annotations

import json
import random
import time
import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pyarrow as pa
from deltalake import CommitProperties, Transaction
from deltalake.schema import Schema as DeltaSchema

from kraftlake.logging import get_logger

from ..arrow import LOG_SCHEMA, RECORD_COLUMN
from ..arrow_input import from_arrow
from ..base import Record, gc_paused
from ..columnar import ColumnBatch, Validated, from_python, stamped, to_table
from ..errors import AppendConflictError, CorruptStoreError, RecordError
from ..producer import ProducerSeq
from . import digests, log_checks
from .data_files import ENGINE_VERSION, now_ms, write_data_file
from .delta_commit import DataFile, checkpoint, commit_json
from .log_parts import LogParts
from .snapshot import OFFSET_TXN, arrow_schema

log = get_logger("kraftlake.log")

PRODUCER_TXN = "kraftlake.producer/"
KEY_FORMAT_TXN = "kraftlake.producer-keys"
"""App transaction set when a log is created (version ``KEY_FORMAT``): its producer keys are
escaped (``producer_key``). Logs created before have raw ids in their keys, read through
``Log``'s legacy path. (Delta refuses table properties it does not know.)"""
KEY_FORMAT = 1
MAX_PRODUCER_LENGTH = ProducerSeq.MAX_PRODUCER_LENGTH


@dataclass(frozen=True)
class AppendResult:
    """Where a batch landed. ``duplicate``: it had landed before and was not written again."""

    first_offset: int
    last_offset: int
    version: int
    duplicate: bool = False

    def to_dict(self) -> dict[str, Any]:
        # Spelled out: the service answers every append with it, and asdict's deep copy costs
        # more than the rest of the answer.
        return {
            "first_offset": self.first_offset,
            "last_offset": self.last_offset,
            "version": self.version,
            "duplicate": self.duplicate,
        }


@dataclass(frozen=True)
class Batch:
    """One batch of a group commit (``Log.append_group``): its records and, for exactly-once,
    its producer and sequence."""

    records: Sequence[Record]
    producer: str | None = None
    seq: int | None = None


def producer_key(producer: str, part: str = "") -> str:
    """The app transaction id of a producer's sequence (``part`` ""), or of where its last batch
    landed (``first``, ``last``, ``version``). ``%`` and ``/`` in the id are escaped, so no id
    holds a ``/`` and no two producers share a key (raw ids let a producer ``w/first`` overwrite
    producer ``w``'s first offset). Ids without either character keep the keys they always had."""
    escaped = producer.replace("%", "%25").replace("/", "%2F")
    return PRODUCER_TXN + escaped + ("/" + part if part else "")


def legacy_keys_ambiguous(producer: str) -> bool:
    """Whether the keys the old code wrote for ``producer`` differ from ``producer_key``'s (its
    id holds ``/`` or ``%``): those are read from the commits' metadata instead."""
    return "/" in producer or "%" in producer


def _producer_txns(producer: str, seq: int, first: int, last: int, version: int) -> list[tuple[str, int]]:
    """A producer's app transactions (app id, version) in a commit: its sequence, where that
    batch landed, and the version (fenced: the commit becomes exactly that version, or nothing).
    The one place their ids are made (``producer_key``)."""
    return [
        (producer_key(producer), seq),
        (producer_key(producer, "first"), first),
        (producer_key(producer, "last"), last),
        (producer_key(producer, "version"), version),
    ]


class AppendingMixin(LogParts):
    """``Log``'s appends, over the ``Log``'s state (log.py): the version it stands on and the app
    transactions there (``_head``, ``_txn``), the commit lock, ``_catch_up`` after a lost race;
    and its ``history``, which says where a retry older than the stored sequence landed."""

    def _evolve_schema(self) -> pa.Schema:
        """Add the columns and struct fields this code knows and the table lacks (newer record
        types or fields); tables written by an older kraftlake stay readable and appendable."""
        current = arrow_schema(self._dt)
        missing = []
        for f in LOG_SCHEMA:
            if f.name not in current.names:
                missing.append(f)
            elif pa.types.is_struct(f.type) and not _struct_covers(current.field(f.name).type, f.type):
                missing.append(f)
        if missing:
            fields = DeltaSchema.from_arrow(pa.schema(missing)).fields
            # The new schema's digest in the same commit (log_checks.SCHEMA_TXN): a reader in
            # between never sees a schema without its own.
            digest = log_checks.schema_digest(log_checks.evolved(self._dt.schema(), fields))
            self._dt.alter.add_columns(
                fields,
                commit_properties=CommitProperties(app_transactions=[Transaction(log_checks.SCHEMA_TXN, digest)]),
            )
            self.refresh()  # the schema change is a commit: appends go on after it
            log.info("log.schema_evolved", path=self.path, columns=[f.name for f in missing])
        self._schema_checked = True
        return LOG_SCHEMA

    def append(
        self,
        records: Sequence[Record] | pa.Table | pa.RecordBatch,
        *,
        producer: str | None = None,
        seq: int | None = None,
        validated: bool = False,
        max_attempts: int = 1000,
    ) -> AppendResult:
        """Append one batch atomically, with offsets ``last + 1 .. last + len(records)``.

        Args:
            records: the batch, validated first (``RecordError`` names index, type and field):
                records, or a pyarrow ``Table``/``RecordBatch`` of rows shaped like the log's
                own (``records.arrow_input``; its errors name the row).
            producer, seq: give both for exactly-once (``ProducerSeq``): a batch whose ``seq`` is
                not above the producer's stored sequence is acknowledged with its original offsets.
            validated: the records come straight from kraftlake's decoders (``iter_lines``,
                ``decode_line``, ``from_builtins``), which already checked and upcast them; skips
                the second check. Structs built by calling their class are never validated:
                leave it False for those.
            max_attempts: fenced commits to try before ``AppendConflictError``.
        """
        # No collection while the batch is checked, converted and committed: its tuples and
        # arrays hold no reference cycles and die when the append returns, while a collection
        # in between re-scans all of them (6-8 ms of CPU a 10 000-record append, bench/RESULTS.md).
        with gc_paused():
            try:
                return self._append(records, producer, seq, validated, max_attempts)
            finally:
                self._settle_load()  # a duplicate or a refused batch never reached the commit

    def _append(
        self,
        records: Sequence[Record] | pa.Table | pa.RecordBatch,
        producer: str | None,
        seq: int | None,
        validated: bool,
        max_attempts: int,
    ) -> AppendResult:
        ProducerSeq.of(producer, seq)
        if isinstance(records, (pa.Table, pa.RecordBatch)):
            records, validated = from_arrow(records, decode=False), True
        if not records:
            raise RecordError("a batch holds at least one record")
        self._load_in_background()
        # Checked and converted column by column (records.columnar); a ``Validated`` batch
        # brings its columns along.
        batch = (
            (records if isinstance(records, (Validated, ColumnBatch)) else list(records))
            if validated
            else from_python(records)  # type: ignore[arg-type]  # not validated: records, never columns
        )
        if not self._schema_checked:
            self._evolve_schema()
        ts_ms = now_ms()
        encoded_at = self.last_offset + 1
        data = to_table(batch, first_offset=encoded_at, ts_ms=ts_ms, producer=producer, producer_seq=seq)
        batch_id = str(uuid.uuid4())
        rng = random.Random(batch_id)  # jitter only: no effect on what is written
        for attempt in range(1, max_attempts + 1):
            if producer is not None:
                done = self._duplicate(producer, seq)  # type: ignore[arg-type]  # ProducerSeq.of: a seq with a producer
                if done is not None:
                    return done
            first = self.last_offset + 1
            version = self._head
            if first != encoded_at:  # another writer took our offsets: re-encode the records
                data = data.set_column(
                    data.schema.get_field_index(RECORD_COLUMN), RECORD_COLUMN, stamped(batch, first, ts_ms)
                )
                encoded_at = first
            result = self._try_commit(data, first, version, producer, seq, batch_id)
            if result is not None:
                if attempt > 1:
                    log.debug("append.committed_after_retries", attempts=attempt, version=result.version)
                return result
            self._catch_up()
            # Lost the race to another writer: back off a little, with jitter, so that writers
            # contending for the same version don't keep colliding in lockstep.
            time.sleep(rng.uniform(0, min(0.05, 0.002 * attempt)))
        raise AppendConflictError(f"gave up after {max_attempts} attempts: other writers kept committing first")

    def _try_commit(
        self,
        data: pa.Table,
        first: int,
        version: int,
        producer: str | None,
        seq: int | None,
        batch_id: str,
        group: list[tuple[str | None, int | None, int, int]] | None = None,
    ) -> AppendResult | None:
        n = data.num_rows
        data = data.set_column(
            0, "offset", pa.array(np.arange(first, first + n, dtype=np.int64))
        )  # not range(): 0.8 ms at 10 000
        self._lineage.prefetch(version)  # the look at what the commit builds on, beside the file's put
        file = write_data_file(self.location, data, f"part-{first:020d}-{batch_id}.zstd.parquet")
        return self._commit_file(file, first, n, version, producer, seq, batch_id, group)

    def commit_data_file(self, file: DataFile, first: int, records: int, batch_id: str) -> AppendResult:
        """Commit a data file already written into this local log's directory (``write_data_file``,
        named ``part-<first, 20 digits>-<batch_id>.crc32-<digest>.zstd.parquet``) holding rows ``first .. first +
        records - 1`` exactly as an append writes them: for bulk builders that make the rows column
        by column (``bench/tile.py``). The rows are not checked here. ``first`` must follow the
        log's last offset; a commit lost to another writer raises ``AppendConflictError``."""
        if self.location.local is None:
            raise ValueError("commit_data_file writes local logs only")
        if not file.path.startswith(f"part-{first:020d}-{batch_id}.crc32-") or digests.expected(file.path) is None:
            raise ValueError(f"{file.path} is not the data file of offset {first} and batch {batch_id}")
        if not self._schema_checked:
            self._evolve_schema()
        if first != self.last_offset + 1:
            raise ValueError(f"the file starts at offset {first}, but the log's next offset is {self.last_offset + 1}")
        result = self._commit_file(file, first, records, self._head, None, None, batch_id, None)
        if result is None:
            raise AppendConflictError(f"another writer committed version {self._head + 1} first")
        return result

    def _commit_file(
        self,
        file: DataFile,
        first: int,
        n: int,
        version: int,
        producer: str | None,
        seq: int | None,
        batch_id: str,
        group: list[tuple[str | None, int | None, int, int]] | None,
    ) -> AppendResult | None:
        last = first + n - 1
        txns = [(OFFSET_TXN, last)]
        meta = {
            "kraftlake.operation": "append",
            "kraftlake.batch": batch_id,
            "kraftlake.first_offset": str(first),
            "kraftlake.last_offset": str(last),
            "kraftlake.records": str(n),
        }
        if producer is not None:
            txns += _producer_txns(producer, seq, first, last, version + 1)  # type: ignore[arg-type]  # seq with producer
            meta |= {"kraftlake.producer": producer, "kraftlake.seq": str(seq)}
        if group is not None:
            # Each producer's newest batch in the group is its stored sequence; every batch's
            # range is in the commit's metadata, where a late retry finds it.
            newest: dict[str, tuple[int, int, int]] = {}
            for p, q, lo, hi in group:
                if p is not None:
                    newest[p] = (q, lo, hi)  # type: ignore[assignment]  # a producer's batch has its seq
            for p, (q, lo, hi) in sorted(newest.items()):
                txns += _producer_txns(p, q, lo, hi, version + 1)
            meta["kraftlake.batches"] = json.dumps(group)
        try:
            if not self.location.commits_by_put:
                landed = self._commit_on_store(version, [file], txns, meta)
            else:
                body = commit_json([file], txns, meta, now_ms(), ENGINE_VERSION)
                with self._commit_lock:
                    landed = version == self._head and self._put_commit(version + 1, body)
                    if landed:
                        self._head = version + 1
                        self._commits_since_open += 1
                        self._txn_cache.update(txns)
        except CorruptStoreError:  # refused before any put (``lineage``): the file is nobody's
            self.location.delete(file.path)
            raise
        if not landed:
            self.location.delete(file.path)  # nothing refers to it: the refused commit never happened
            return None
        if (version + 1) % self._checkpoint_interval == 0:
            if self._upkeep is not None:
                self._upkeep.request(version + 1)
            else:
                checkpoint(self.location, version + 1)
        log.debug("append.committed", first_offset=first, last_offset=last, version=version + 1)
        return AppendResult(first, last, version + 1)

    def append_group(self, batches: Sequence[Batch], *, max_attempts: int = 1000) -> list[AppendResult]:
        """Append several batches in one commit (group commit: what the HTTP service does with
        the requests waiting for the same commit). Each batch lands whole and contiguous, in the
        order given; a batch a producer already sent is answered with its original offsets and
        not written; all the others land together, or none does. Records must come from
        kraftlake's decoders (``from_builtins``, ``decode_line``): they are not checked again.
        """
        with gc_paused():  # as in ``append``
            try:
                return self._append_group(batches, max_attempts)
            finally:
                self._settle_load()

    def _append_group(self, batches: Sequence[Batch], max_attempts: int) -> list[AppendResult]:
        for b in batches:
            ProducerSeq.of(b.producer, b.seq)
            if not b.records:
                raise RecordError("a batch holds at least one record")
        self._load_in_background()
        if not self._schema_checked:
            self._evolve_schema()
        ts_ms = now_ms()
        batch_id = str(uuid.uuid4())
        rng = random.Random(batch_id)
        for attempt in range(1, max_attempts + 1):
            results: list[AppendResult | None] = [None] * len(batches)
            pending: list[int] = []
            claimed: dict[str, int] = {}
            for i, b in enumerate(batches):
                if b.producer is not None:
                    done = self._duplicate(b.producer, b.seq)  # type: ignore[arg-type]  # checked: a seq with a producer
                    if done is not None:
                        results[i] = done
                        continue
                    if claimed.get(b.producer, -1) >= b.seq:  # type: ignore[operator]  # as above
                        raise RecordError(
                            f"producer {b.producer!r}: seq {b.seq} follows seq {claimed[b.producer]} in one group"
                        )
                    claimed[b.producer] = b.seq  # type: ignore[assignment]  # as above
                pending.append(i)
            if not pending:
                return results  # type: ignore[return-value]  # every slot filled
            first = self.last_offset + 1
            version = self._head
            # One table for the whole group (a table per batch costs a conversion per column
            # per batch, and a chunk per batch in the file): producers set per row after.
            rows: list[Record] = []
            group, producers, seqs, at = [], [], [], first
            for i in pending:
                b = batches[i]
                n = len(b.records)
                rows.extend(b.records)
                group.append((b.producer, b.seq, at, at + n - 1))
                producers += [b.producer] * n
                seqs += [b.seq] * n
                at += n
            data = to_table(rows, first_offset=first, ts_ms=ts_ms)
            data = data.set_column(
                data.schema.get_field_index("producer"), "producer", pa.array(producers, pa.string())
            )
            data = data.set_column(
                data.schema.get_field_index("producer_seq"), "producer_seq", pa.array(seqs, pa.int64())
            )
            landed = self._try_commit(data, first, version, None, None, batch_id, group)
            if landed is not None:
                for i, (_, _, lo, hi) in zip(pending, group):
                    results[i] = AppendResult(lo, hi, landed.version)
                return results  # type: ignore[return-value]  # every slot filled
            self._catch_up()
            time.sleep(rng.uniform(0, min(0.05, 0.002 * attempt)))
        raise AppendConflictError(f"gave up after {max_attempts} attempts: other writers kept committing first")

    def _legacy_landing(self, producer: str) -> tuple[int, int, int, int] | None:
        """(seq, first, last, version) of ``producer``'s newest batch in a log written with the old
        keys, from the commits' metadata (unambiguous where the old keys were not); None when it
        has none. Cached: the old code's commits are all in the past."""
        cache = self._legacy_cache
        if producer not in cache:
            cache[producer] = None
            for c in self.history():
                if c.producer == producer and c.seq is not None and c.first_offset is not None:
                    cache[producer] = (c.seq, c.first_offset, c.last_offset, c.version)  # type: ignore[assignment]  # set with first
                    break
                mine = [(q, lo, hi) for p, q, lo, hi in c.batches if p == producer and q is not None]
                if mine:
                    q, lo, hi = max(mine)
                    cache[producer] = (q, lo, hi, c.version)
                    break
        return cache[producer]

    def _duplicate(self, producer: str, seq: int) -> AppendResult | None:
        """The original landing of a batch this producer already sent, or None for a new one."""
        stored = self.producer_seq(producer)
        if stored is None or seq > stored:
            return None
        txn = self._txn
        if seq == stored:
            first, last = txn(producer_key(producer, "first")), txn(producer_key(producer, "last"))
            version = txn(producer_key(producer, "version"))
            if first is None or last is None or version is None:  # a log with the old keys
                landing = self._legacy_landing(producer)
                assert landing is not None
                first, last, version = landing[1:]
            return AppendResult(first, last, version, duplicate=True)
        # An older batch (a retry whose acknowledgement was lost long ago): its commit says where.
        for c in self.history():
            if c.producer == producer and c.seq == seq and c.first_offset is not None:
                return AppendResult(c.first_offset, c.last_offset, c.version, duplicate=True)  # type: ignore[arg-type]  # set with first
            for p, q, lo, hi in c.batches:
                if p == producer and q == seq:
                    return AppendResult(lo, hi, c.version, duplicate=True)
        raise RecordError(
            f"producer {producer!r} sent seq {seq} after seq {stored}, and no commit in the"
            " table's history holds it: sequences must increase"
        )


def _struct_covers(have: pa.DataType, want: pa.DataType) -> bool:
    """Whether struct type ``have`` already holds every (nested) field of ``want``."""
    if not pa.types.is_struct(want):
        return True
    if not pa.types.is_struct(have):
        return False
    names = {f.name: f for f in have}
    return all(f.name in names and _struct_covers(names[f.name].type, f.type) for f in want)
