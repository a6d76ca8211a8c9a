"""Ranked lookups: how many of a key's sorted offsets lie at most at a position, without a range
join. The plan's interval joins (K4/K5's bad intervals, the incidents' requests and offline
intervals) number a key's intervals in offset order and rank each partition state's start and end
among their edges: the state overlaps the intervals between the two ranks.

A key's offsets are cut into buckets of its own (``rank_rows``): equal widths over the span of the
key's offsets, about ``PER_BUCKET`` offsets to a bucket, per key a row of ``<table>_keys`` (first
offset, width, buckets) and per bucket a row of ``<table>`` (for each list: how many lie in the
buckets before, and the bucket's own offsets). A position is clamped into its key's buckets (one
before the first offset counts none of it; one after the last counts all), so a lookup reads a
few offsets however long the history, and the table has about (offsets / ``PER_BUCKET``) rows.
Buckets over the whole history (the same for every key) made a key whose offsets all sit in a
part of a long history (a broker of one tiled shard) read ever longer lists: the lookup grew with
the square of the history."""

from __future__ import annotations

import bisect

from kraftlake.statemachine.sql_dialect import Dialect

PER_BUCKET = 8
"""The offsets a key's bucket holds on average (``rank_rows``)."""


def rank_rows(marks: dict[tuple, list[list[int]]], per: int | None = None) -> tuple[list[tuple], list[tuple]]:
    """The rank table's rows (key..., bucket, then per list of ``marks[key]``: before, offsets)
    and the key table's (key..., first, width, buckets) for sorted offset lists per key; a key
    with no offsets in any list is left out (a lookup's inner join drops it)."""
    per = per or PER_BUCKET
    rows, keys = [], []
    for key, lists in sorted(marks.items()):
        every = [o for offsets in lists for o in offsets]
        if not every:
            continue
        first, final = min(every), max(every)
        nb = max(1, -(-max(len(offsets) for offsets in lists) // per))
        width = (final - first) // nb + 1
        keys.append((*key, first, width, nb))
        edges = [[bisect.bisect_left(offsets, first + k * width) for k in range(nb)] for offsets in lists]
        for k in range(nb):
            row: list = [*key, k]
            for offsets, at in zip(lists, edges):
                hi = at[k + 1] if k + 1 < nb else len(offsets)
                row += [at[k], offsets[at[k] : hi]]
            rows.append(tuple(row))
    return rows, keys


def register(engine, name: str, marks: dict[tuple, list[list[int]]], keys: list[tuple[str, str]], lists: list[str]):
    """Tables ``name`` and ``name_keys`` (``rank_rows``) in ``engine``: key columns ``keys``
    ((name, type)), a (``x_before``, ``x_offs``) pair per list name ``x`` of ``lists``."""
    rows, key_rows = rank_rows(marks)
    columns = [*keys, ("bucket", "BIGINT")]
    for n in lists:
        columns += [(f"{n}_before", "BIGINT"), (f"{n}_offs", "ARRAY<BIGINT>")]
    engine.table(name, rows, columns)
    engine.table(f"{name}_keys", key_rows, [*keys, ("first_", "BIGINT"), ("width", "BIGINT"), ("nb", "BIGINT")])


def lookup(
    d: Dialect, table: str, probe: str, alias: str, on: str, lo: str, hi: str, lo_lists: list[str], hi_lists: list[str]
) -> str:
    """A relation, named ``alias``: the relation ``probe`` (as ``alias``) with, per list ``x`` of
    ``lo_lists``, ``x_lo``: how many of the key's ``x`` offsets of the rank table ``table`` are at
    most position ``lo``; per list of ``hi_lists``, ``x_hi``: at most ``hi``. ``on`` (a
    condition on ``{r}`` naming the probe's key columns, e.g. ``{r}.b = m.b AND {r}.dir =
    m.probe``) picks the key; keys without offsets are left out.

    The key table, then each position's bucket, are joined one at a time, each in a subquery of
    its own: in one join tree the engine joined a key's buckets with each other first (every
    pair of them, the square of the key's buckets) and each probe with those pairs."""

    def bucket(position: str) -> str:
        return f"least(greatest({d.idiv(f'{position} - rk.first_', 'rk.width')}, 0), rk.nb - 1)"

    def ranks(r: str, lists: list[str], position: str, suffix: str) -> str:
        return "".join(f", {rank(d, r, x, position)} AS {x}_{suffix}" for x in lists)

    keyed = f"""(
          SELECT {alias}.*, {bucket(lo)} AS bucket_lo_, {bucket(hi)} AS bucket_hi_
          FROM {probe} {alias} JOIN {table}_keys rk ON {on.format(r="rk")})"""
    at_lo = f"""(
          SELECT {alias}.*{ranks("r0", lo_lists, lo, "lo")}
          FROM {keyed} {alias} JOIN {table} r0 ON {on.format(r="r0")} AND r0.bucket = {alias}.bucket_lo_)"""
    return f"""(
          SELECT {alias}.*{ranks("r1", hi_lists, hi, "hi")}
          FROM {at_lo} {alias} JOIN {table} r1 ON {on.format(r="r1")} AND r1.bucket = {alias}.bucket_hi_) {alias}"""


def rank(d: Dialect, r: str, column: str, position: str) -> str:
    """How many of list ``column``'s offsets of the bucket row ``r`` (``lookup``) are at most ``position``."""
    return f"({r}.{column}_before + {d.size(d.filter(f'{r}.{column}_offs', lambda x: f'{x} <= {position}'))})"
