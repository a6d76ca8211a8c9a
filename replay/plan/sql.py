"""The audit's partition side as SQL, the machinery every invariant shares: named queries over the
log (a relation ``log`` with the log table's columns) and the small tables the driver registers
(``lives``, ``bad``, ``removals``, ``events``, ``reg_epochs``), each a function of the dialect
(``statemachine.sql_dialect``) returning one statement. The same text runs on DuckDB and on
Spark SQL. Each invariant's own statements are beside its rule
(``statemachine.kraft.invariants_sql``), reading the relations made here.

What each query computes is what Kafka's replay and the local audit compute per record:

- ``partition_rows``, ``fills``, ``timeline``: every partition's state after each of its
  records (``statemachine.kraft.partitions.merge`` as forward fills per partition lifetime),
  the records the reducer refuses (``fills.refused``), and per state what the invariants read:
  K1's and K3's kind of wrongness (their conditions are the invariants': ``k1_kinds``,
  ``k3_kinds``), the state before, UNASSIGNED replicas. One window pass (``fills``) states
  nearly every partition; the few it cannot (``unclean``: registered twice, a refused change,
  directories folded per replica where a change sets replicas without naming them) take the
  general form (``judged``, ``states``).
- ``members``, ``overlaps``: leaders and ISR members joined with the intervals where their
  broker or directory is bad (ranked lookups, no range join): ``bad_overlaps``, which K4, K5
  and K7 read.
- ``islands``: runs of wrong states (gaps and islands), any invariant.
- ``held``: the grace, one mechanism for every graced invariant.
- ``final_states``, ``refusals``: the registrations at the end (the state hash), the refused
  records (L3, K2).

Queries return kinds and fields, not words: the driver words the few rows it collects with the
invariants' own message functions (``plan.run``), so that no template is written twice.
"""

from __future__ import annotations

from kraftlake.records.kraft import LOST, MIGRATING, UNASSIGNED
from kraftlake.statemachine.kraft.invariants_sql import BEFORE, NO_DIR, k1_kinds, k3_kinds, level_at
from kraftlake.statemachine.sql_dialect import Dialect

from .ranks import lookup

PARTITION_TYPES = ("Partition", "PartitionChange")
ANY_DIR = "*"
"""A bad interval of a whole broker (unregistered, fenced): never a directory id."""
RESERVED_DIRS = (MIGRATING, UNASSIGNED, LOST, ANY_DIR, NO_DIR)
"""The directory ids and marks the plan names itself (``directories``)."""


def _window(by: str = "pk", order: str = "off") -> str:
    return f"WINDOW w AS (PARTITION BY {by} ORDER BY {order}), upto AS (PARTITION BY {by} ORDER BY {order} ROWS BETWEEN UNBOUNDED PRECEDING AND CURRENT ROW)"


def published(d: Dialect, skip: list[tuple[int, int]]) -> str:
    """A condition: the row's offset is in none of ``skip`` ([first, last] each)."""
    o = d.q("offset")
    return " AND ".join([f"NOT ({o} BETWEEN {lo} AND {hi})" for lo, hi in skip]) or "TRUE"


def partition_rows(d: Dialect, skip: list[tuple[int, int]]) -> str:
    """The published partition records' own fields (``set_*``: null = unchanged), numbered by
    partition lifetime: ``pk`` (topic lifetime in the high 32 bits, partition id in the low;
    -1 when the topic does not exist at the record)."""
    p, c, t = d.q("partition"), d.q("partition_change"), d.q("type")
    is_rec = f"{t} = 'Partition'"
    assign = f"coalesce({p}.assignment, {c}.assignment)"
    sets = f"""
        coalesce({p}.replicas, {c}.replicas) AS set_replicas,
        coalesce({p}.isr, {c}.isr) AS set_isr,
        coalesce({p}.leader, CASE WHEN {c}.leader <> -2 THEN {c}.leader END) AS set_leader,
        coalesce({p}.removing_replicas, {c}.removing_replicas) AS set_removing,
        coalesce({p}.adding_replicas, {c}.adding_replicas) AS set_adding,
        coalesce({p}.leader_recovery_state,
                 CASE WHEN {c}.leader_recovery_state <> -1 THEN {c}.leader_recovery_state END) AS set_lrs,
        CASE WHEN {is_rec} THEN coalesce({p}.eligible_leader_replicas, {d.empty("INT")})
             ELSE {c}.eligible_leader_replicas END AS set_elr,
        CASE WHEN {is_rec} THEN coalesce({p}.last_known_elr, {d.empty("INT")})
             ELSE {c}.last_known_elr END AS set_lkelr"""
    return f"""
    WITH r AS (
      SELECT {d.q("offset")} AS off, {d.q("key")} AS record_key, {is_rec} AS is_record,
        coalesce({p}.topic_id, {c}.topic_id) AS topic_id,
        coalesce({p}.partition_id, {c}.partition_id) AS partition_id,
        {sets},
        CASE WHEN {d.size(assign)} > 0 THEN {d.transform(assign, lambda v: f"{v}.broker")} END AS assign_brokers,
        CASE WHEN {d.size(assign)} > 0 THEN {d.as_dirs(d.transform(assign, lambda v: f"{v}.directory"))} END
          AS assign_dirs,
        CASE WHEN NOT ({is_rec}) AND {c}.leader <> -2 THEN 1 ELSE 0 END AS sets_leader,
        {p}.leader_epoch AS base_le, {p}.partition_epoch AS base_pe
      FROM log WHERE {t} IN ('Partition', 'PartitionChange') AND {published(d, skip)}
    )
    SELECT r.*, l.removed,
      coalesce(l.life_index * 4294967296 + (CAST(r.partition_id AS BIGINT) & 4294967295), -1) AS pk
    FROM r LEFT JOIN lives l
      ON r.topic_id = l.life_topic AND r.off > l.life AND (l.removed IS NULL OR r.off < l.removed)
    """


def assigned(d: Dialect, skip: list[tuple[int, int]]) -> str:
    """(broker, dir): each replica directory the published partition records assign."""
    p, c, t = d.q("partition"), d.q("partition_change"), d.q("type")
    return f"""
    SELECT DISTINCT a.broker, a.directory FROM (
      SELECT {d.explode(f"coalesce({p}.assignment, {c}.assignment)", "a")}
      FROM log WHERE {t} IN ('Partition', 'PartitionChange') AND {published(d, skip)}
    ) x
    """


def reported_dirs(d: Dialect) -> str:
    """(dir): each directory id an ``AssignReplicasToDirsRequest`` reports, for the plan's
    dictionary of directory ids: K9 carries the reported directory as one (``k9_runs``)."""
    req, t = d.q("assign_replicas_to_dirs_request"), d.q("type")
    return f"""
    SELECT DISTINCT x.dd.id AS dir FROM (
      SELECT {d.explode(f"{req}.directories", "dd")} FROM log WHERE {t} = 'AssignReplicasToDirsRequest'
    ) x
    """


def _fits(replicas: str) -> str:
    """Whether a change's assignment names ``replicas`` in order (else the reducer refuses it):
    the two arrays are equal (both engines compare arrays element by element)."""
    return f"(assign_brokers = {replicas})"


def _refused(d: Dialect, replicas: str) -> str:
    """Why the reducer refuses a row (null = applied), from ``segment`` (the partition's last
    PartitionRecord so far) and ``replicas`` in force: refused rows never set replicas, so the
    replicas in force at a row are the same counted over every row or over the applied ones."""
    return f"""CASE
          WHEN pk = -1 THEN 'topic'
          WHEN segment IS NULL THEN 'partition'
          WHEN set_replicas IS NULL AND assign_brokers IS NOT NULL AND NOT {_fits(replicas)} THEN 'directories'
        END"""


def _explicit_dirs(d: Dialect) -> str:
    """The directories a row names: its assignment's, or MIGRATING per replica for a
    PartitionRecord without one (as Kafka upcasts a v0 record)."""
    return f"""CASE WHEN assign_dirs IS NOT NULL THEN assign_dirs
        WHEN is_record THEN {d.repeat(d.dir(MIGRATING), d.size("set_replicas"))} END"""


_BEFORE = f"before AS {BEFORE}"


def fills(d: Dialect, levels: list[tuple[int, int]], mv_base: int, mv_3_6: int) -> str:
    """The forward fill of every partition record, in one window pass: each row's state after
    it and before it (``STATE``), what the invariants read of it (``derived``), and why it is
    refused (``refused``, null = applied).

    One pass is exact for the partitions ``unclean`` does not name (every record applied, one
    PartitionRecord, first, and directories never folded): there the epochs are the
    PartitionRecord's plus the changes counted since. The others (a partition registered
    twice, a refused change in the middle of its history, replicas changed without their
    directories) go through ``judged`` and ``states``, the general form, two passes more."""
    explicit = _explicit_dirs(d)
    return f"""
    WITH a AS (
      SELECT pk, off, is_record, removed, set_replicas, sets_leader, assign_brokers,
        (NOT is_record AND set_replicas IS NOT NULL AND assign_dirs IS NULL) AS folds,
        {d.last("CASE WHEN is_record THEN off END")} OVER upto AS segment,
        {d.last("set_replicas")} OVER upto AS replicas,
        {d.last("set_replicas")} OVER before AS old_replicas,
        {d.last("set_isr")} OVER upto AS isr,
        {d.last("set_isr")} OVER before AS old_isr,
        {d.last("set_leader")} OVER upto AS leader,
        {d.last("set_leader")} OVER before AS old_leader,
        {d.last(explicit)} OVER upto AS dirs,
        {d.last(explicit)} OVER before AS old_dirs,
        {d.last("base_le")} OVER upto + count(CASE WHEN sets_leader = 1 THEN 1 END) OVER upto AS leader_epoch,
        {d.last("base_pe")} OVER upto + count(CASE WHEN NOT is_record THEN 1 END) OVER upto AS partition_epoch,
        lead(off) OVER w AS next_off
      FROM partition_rows {_window()}, {_BEFORE}
    ),
    b AS (
      SELECT pk, off, coalesce(next_off, removed) AS end_, removed, is_record, leader, isr, replicas, dirs,
        leader_epoch, partition_epoch, old_replicas, old_isr, old_leader, old_dirs,
        CASE WHEN NOT is_record THEN leader_epoch - sets_leader END AS old_leader_epoch,
        CASE WHEN NOT is_record THEN partition_epoch - 1 END AS old_partition_epoch,
        segment, folds, assign_brokers, {_refused(d, "replicas")} AS refused
      FROM a
    )
    {derived(d, "b", levels, mv_base, mv_3_6)}
    """


def unclean() -> str:
    """The partitions ``fills`` cannot state in one pass: a PartitionRecord after another row
    (a second registration, or changes refused before the first), a refused row, a change of
    replicas without directories."""
    return (
        "SELECT DISTINCT pk FROM fills WHERE refused IS NOT NULL OR folds OR (is_record AND old_replicas IS NOT NULL)"
    )


def judged(d: Dialect) -> str:
    """The partition records of the ``unclean`` partitions with what the reducer does with each
    (``refused``: null = applied) and the replicas in force at it."""
    return f"""
    WITH s AS (
      SELECT *,
        {d.last("CASE WHEN is_record THEN off END")} OVER upto AS segment,
        {d.last("set_replicas")} OVER upto AS cur_replicas
      FROM partition_rows WHERE pk IN (SELECT pk FROM unclean) {_window()}
    )
    SELECT pk, off, is_record, removed, set_replicas, set_isr, set_leader, assign_brokers, assign_dirs, sets_leader,
      base_le, base_pe, cur_replicas, {_refused(d, "cur_replicas")} AS refused
    FROM s
    """


OTHER_FIELDS = ("set_removing", "set_adding", "set_lrs", "set_elr", "set_lkelr")
"""The registration's fields no invariant reads: each record's own value (null = unchanged),
folded for the final states only (``final_states``)."""


def _case(kinds: dict[str, str]) -> str:
    return "CASE " + " ".join(f"WHEN {cond} THEN '{kind}'" for kind, cond in kinds.items()) + " END"


def states(d: Dialect) -> str:
    """The general form of ``fills``, for the ``unclean`` partitions (``judged``): the applied
    rows' states after and before them, the epochs counted per PartitionRecord, and directories
    folded per replica where a change sets replicas without naming them."""
    explicit = _explicit_dirs(d)
    unassigned = d.dir(UNASSIGNED)
    ints = d.empty("INT")
    strings = d.empty("DIR")
    # A replica a change adds without directories is UNASSIGNED, or MIGRATING when the
    # partition's directories were all MIGRATING (KAFKA-16583; ``partitions.merge``): judged by
    # the last directories a record named (exact unless a fold dropped every other replica).
    named = f"""CASE WHEN explicit_dirs IS NOT NULL THEN {d.at("explicit_dirs", "pos + 1")}
        WHEN set_replicas IS NOT NULL AND NOT {d.contains("before", "b")}
          THEN CASE WHEN migrating_before THEN {d.dir(MIGRATING)} ELSE {unassigned} END END"""
    return f"""
    WITH t0 AS (
      SELECT pk, off, is_record, removed, set_replicas, sets_leader,
        cur_replicas AS replicas,
        {d.last("set_replicas")} OVER before AS old_replicas,
        {d.last("set_isr")} OVER upto AS isr,
        {d.last("set_isr")} OVER before AS old_isr,
        {d.last("set_leader")} OVER upto AS leader,
        {d.last("set_leader")} OVER before AS old_leader,
        {explicit} AS explicit_dirs,
        {d.last(explicit)} OVER upto AS dirs,
        {d.last(explicit)} OVER before AS old_dirs,
        {d.last("CASE WHEN is_record THEN base_le END")} OVER upto AS base_le,
        {d.last("CASE WHEN is_record THEN base_pe END")} OVER upto AS base_pe,
        count(CASE WHEN sets_leader = 1 THEN 1 END) OVER upto AS n_leader,
        count(CASE WHEN NOT is_record THEN 1 END) OVER upto AS n_change,
        max(CASE WHEN NOT is_record AND set_replicas IS NOT NULL AND assign_dirs IS NULL THEN 1 ELSE 0 END)
          OVER (PARTITION BY pk) AS folds_dirs,
        lead(off) OVER w AS next_off
      FROM judged WHERE refused IS NULL {_window()}, {_BEFORE}
    ),
    t1 AS (
      -- Epochs: a PartitionRecord's, then +1 per change (partition) and per change that sets the
      -- leader (leader epoch), as PartitionRegistration.merge counts: the running counts,
      -- corrected at each PartitionRecord (whose own counts equal the row's before it).
      SELECT *,
        {d.last("CASE WHEN is_record THEN base_le - n_leader END")} OVER upto + n_leader AS leader_epoch,
        {d.last("CASE WHEN is_record THEN base_pe - n_change END")} OVER upto + n_change AS partition_epoch,
        {d.last("CASE WHEN is_record THEN base_le - n_leader END")} OVER before + n_leader AS le_before_record,
        {d.last("CASE WHEN is_record THEN base_pe - n_change END")} OVER before + n_change AS pe_before_record,
        coalesce(next_off, removed) AS end_
      FROM t0 {_window()}, {_BEFORE}
    ),
    f0 AS (
      SELECT pk, off, replicas, explicit_dirs, set_replicas,
        coalesce(lag(replicas) OVER w, {ints}) AS before,
        {d.size(d.filter(f"coalesce(old_dirs, {strings})", lambda v: f"{v} <> {d.dir(MIGRATING)}"))} = 0 AS migrating_before
      FROM t1 WHERE folds_dirs = 1 {_window()}
    ),
    f1 AS (
      SELECT pk, off, explicit_dirs, set_replicas, before, migrating_before, {d.posexplode("replicas", "pos", "b")}
      FROM f0
    ),
    f2 AS (
      SELECT pk, off, pos,
        {d.last(named)} OVER (PARTITION BY pk, b ORDER BY off ROWS BETWEEN UNBOUNDED PRECEDING AND CURRENT ROW) AS dir
      FROM f1
    ),
    f3 AS (SELECT pk, off, {d.ordered_list("dir", "pos", "TRUE")} AS folded FROM f2 GROUP BY pk, off),
    f4 AS (SELECT pk, off, folded, lag(folded) OVER (PARTITION BY pk ORDER BY off) AS old_folded FROM f3)
    SELECT t1.pk, t1.off, end_, removed, is_record, leader, isr, replicas,
      CASE WHEN f4.pk IS NULL THEN t1.dirs ELSE f4.folded END AS dirs,
      leader_epoch, partition_epoch, old_replicas, old_isr, old_leader,
      CASE WHEN f4.pk IS NULL THEN t1.old_dirs ELSE f4.old_folded END AS old_dirs,
      CASE WHEN is_record THEN le_before_record ELSE leader_epoch - sets_leader END AS old_leader_epoch,
      CASE WHEN is_record THEN pe_before_record ELSE partition_epoch - 1 END AS old_partition_epoch
    FROM t1 LEFT JOIN f4 ON t1.pk = f4.pk AND t1.off = f4.off
    """


STATE = (
    "pk, off, end_, removed, is_record, leader, isr, replicas, dirs, leader_epoch, partition_epoch,"
    " old_replicas, old_isr, old_leader, old_dirs, old_leader_epoch, old_partition_epoch"
)
"""A partition state's columns, as ``fills`` (for the partitions ``unclean`` does not name) and
``states`` (for those it names) give them."""


TIMELINE = STATE + ", k1, k3, moved, left_, u, old_u, changed"
"""The timeline's columns: a state's and what the invariants read of it (``derived``)."""


def derived(d: Dialect, source: str, levels: list[tuple[int, int]], mv_base: int, mv_3_6: int) -> str:
    """``source``'s states (``STATE``) with what the invariants read of each: ``k1`` and ``k3``
    (the kind of wrongness, null = right), ``moved``, ``left_`` (replicas that left), ``u`` and
    ``old_u`` (UNASSIGNED replicas after and before, where either has any), ``changed``."""
    unassigned = d.dir(UNASSIGNED)
    strings = d.empty("DIR")
    ints = d.empty("INT")

    def u_of(replicas: str, dirs: str) -> str:
        return d.filter_at(replicas, lambda v, i: f"{d.at(dirs, f'{i} + 1')} = {unassigned}")

    moved = "(NOT (replicas IS NOT DISTINCT FROM old_replicas) OR NOT (dirs IS NOT DISTINCT FROM old_dirs))"
    touched = f"({d.contains('dirs', unassigned)} OR {d.contains(f'coalesce(old_dirs, {strings})', unassigned)})"
    return f"""
    SELECT *,
      {_case(k1_kinds(d))} AS k1,
      CASE WHEN old_replicas IS NOT NULL THEN {_case(k3_kinds(d, mv_3_6))} END AS k3,
      {moved} AS moved,
      CASE WHEN {moved} THEN {d.filter(f"coalesce(old_replicas, {ints})", lambda v: f"NOT {d.contains('replicas', v)}")}
        END AS left_,
      CASE WHEN {touched} THEN {u_of("replicas", "dirs")} END AS u,
      CASE WHEN {touched} THEN coalesce({u_of("old_replicas", "old_dirs")}, {ints}) END AS old_u,
      old_replicas IS NOT NULL AS changed
    FROM (SELECT *, {level_at(levels, mv_base)} AS mv FROM {source}) t3
    """


def general_states(d: Dialect, levels: list[tuple[int, int]], mv_base: int, mv_3_6: int) -> str:
    """The ``unclean`` partitions' timeline rows, in the general form (``states``)."""
    return f"SELECT {TIMELINE} FROM ({derived(d, f'({states(d)}) g', levels, mv_base, mv_3_6)}) x"


def timeline(general: bool) -> str:
    """One row per applied partition record (``TIMELINE``): the state after it (leader, isr,
    replicas, dirs, epochs), where it ends (``end_``: the partition's next record, its topic's
    removal, or null), the state before (``old_*``), and ``derived``'s facts. From ``fills``,
    and where any partition is ``unclean`` (``general``), from ``general_states`` for those."""
    if not general:
        return f"SELECT {TIMELINE} FROM fills"
    return (
        f"SELECT {TIMELINE} FROM fills WHERE pk NOT IN (SELECT pk FROM unclean)"
        f" UNION ALL SELECT {TIMELINE} FROM general_states"
    )


def islands(d: Dialect, source: str, wrong: str) -> str:
    """Runs of wrong states per partition. ``source``: pk, off, end_ (where the state stops;
    null = still in force) and the condition ``wrong``. A state missing between two (the one
    before ends before the next begins) counts as right. One row per run: pk, first_offset,
    fixed_by (the record that ended the last wrong state; null = still open)."""
    return f"""
    WITH s AS (SELECT pk, off, end_, ({wrong}) AS wrong FROM {source}),
    f AS (
      SELECT *, CASE WHEN wrong <> coalesce(lag(wrong) OVER w, FALSE)
          OR NOT (lag(end_) OVER w IS NOT DISTINCT FROM off) THEN 1 ELSE 0 END AS flip
      FROM s WINDOW w AS (PARTITION BY pk ORDER BY off)
    ),
    i AS (
      SELECT *, sum(flip) OVER (PARTITION BY pk ORDER BY off ROWS BETWEEN UNBOUNDED PRECEDING AND CURRENT ROW) AS island
      FROM f
    )
    SELECT pk, min(off) AS first_offset, NULLIF({d.max_by("coalesce(end_, -1)", "off")}, -1) AS fixed_by
    FROM i WHERE wrong GROUP BY pk, island
    """


def members(d: Dialect) -> str:
    """A row per partition state and its leader (``role`` L, ``pos`` 0; ``dir`` null when the
    leader is not a replica) and per ISR member on a replica's directory (``role`` I, ``pos``
    its place in the ISR), K5's last replica standing (ISR of one, no leader) left out."""
    ints = d.empty("INT")
    both = d.cat(
        f"CASE WHEN leader <> -1 THEN {d.array('leader')} ELSE {ints} END",
        f"CASE WHEN NOT ({d.size('isr')} = 1 AND leader = -1) THEN isr ELSE {ints} END",
    )
    return f"""
    WITH m AS (
      SELECT pk, off, end_, replicas, dirs, CASE WHEN leader <> -1 THEN 1 ELSE 0 END AS n_leader,
        {d.posexplode(both, "i", "broker")}
      FROM timeline
    ),
    r AS (
      SELECT pk, off, end_, CASE WHEN i < n_leader THEN 'L' ELSE 'I' END AS role,
        CASE WHEN i < n_leader THEN 0 ELSE i - n_leader END AS pos, broker,
        CASE WHEN {d.contains("replicas", "broker")} THEN {d.at("dirs", d.position("replicas", "broker"))} END AS dir
      FROM m
    )
    SELECT * FROM r WHERE role = 'L' OR dir IS NOT NULL
    """


def overlaps(d: Dialect, last: int) -> str:
    """Members joined with the bad intervals (``bad``: bad_broker, bad_dir, idx, start_, stop_,
    reason) they overlap: a leader with its broker's (``bad_dir`` ``ANY_DIR``) and its
    directory's, an ISR member with its directory's; a leader on a broker that never registered
    (not in ``known``: b; an anti join, where a list of the brokers in the text cost a comparison
    per broker and state) is unregistered for its whole state. ``s``/``e``: the overlap.

    A key's (broker, directory) bad intervals are disjoint, numbered ``idx`` in offset order:
    those a state overlaps are the ones from the number that stop at most at its start to the
    number that start before its end, ranked by ``bad_ranks`` (``ranks.lookup``: per
    key and bucket of its own, how many lie in the buckets before, and the bucket's own offsets). A state is exploded into the intervals it
    overlaps only, never into buckets: a long state (a partition's last) meets a long interval
    (a broker left bad to the end) once, not once per bucket they share."""

    probes = f"""CASE WHEN role = 'I' THEN {d.array("dir")} WHEN dir IS NULL THEN {d.array(d.dir(ANY_DIR))}
        ELSE {d.array("dir", d.dir(ANY_DIR))} END"""
    leader_dir = (
        f"CASE WHEN {d.contains('replicas', 'leader')} THEN {d.at('dirs', d.position('replicas', 'leader'))} END"
    )
    end = f"coalesce(p.end_, {last + 1}) - 1"
    return f"""
    WITH p AS (SELECT *, {d.explode(probes, "probe")} FROM members),
    c AS (
      SELECT *, sp_lo AS lo, st_hi AS hi
      FROM {lookup(d, "bad_ranks", "p", "p", "{r}.b = p.broker AND {r}.dir = p.probe", "p.off", end, ["sp"], ["st"])}
    ),
    h AS (SELECT *, {d.explode(d.seq("lo", "hi - 1"), "idx")} FROM c WHERE hi > lo)
    SELECT h.pk, h.off, h.end_, h.role, h.pos, h.broker, h.dir, b.reason,
      greatest(h.off, b.start_) AS s, least(h.end_, b.stop_) AS e
    FROM h JOIN bad b ON b.bad_broker = h.broker AND b.bad_dir = h.probe AND b.idx = h.idx
    UNION ALL SELECT pk, off, end_, 'L' AS role, 0 AS pos, leader AS broker, {leader_dir} AS dir,
      'unregistered' AS reason, off AS s, end_ AS e
    FROM timeline t WHERE leader <> -1 AND NOT EXISTS (SELECT 1 FROM known k WHERE k.b = t.leader)
    """


def held(d: Dialect, source: str, last: int, config) -> str:
    """The rows of ``source`` (candidate intervals: first_offset, fixed_by null = still open,
    and any payload) that lasted beyond the grace (``AuditConfig.past_grace``): at the interval's
    last record, more than ``grace_ms`` ms of record time after its first, or more than the
    record grace where one of the two has no time (or is missing), or where a grace in records
    was asked for."""
    c = f"SELECT *, coalesce(fixed_by - 1, {last}) AS hi FROM {source}"
    times = f"SELECT {d.q('offset')} AS off, ts_ms FROM log"
    span = "c.hi - c.first_offset"
    timed = f"t0.ts_ms IS NOT NULL AND t1.ts_ms IS NOT NULL AND t1.ts_ms - t0.ts_ms > {config.grace_ms}"
    untimed = f"(t0.ts_ms IS NULL OR t1.ts_ms IS NULL) AND {span} > {config.untimed_grace_records}"
    past = f"({timed}) OR ({untimed})"
    records = "FALSE" if config.grace_records is None else f"{span} > {config.grace_records}"

    def joined(where: str) -> str:
        return f"""
        SELECT c.* FROM c LEFT JOIN times t0 ON t0.off = c.first_offset LEFT JOIN times t1 ON t1.off = c.hi
        WHERE c.hi > c.first_offset AND ({where})"""

    if config.grace_records is None or not d.duck:
        return f"WITH c AS ({c}), times AS ({times}) {joined(f'{past} OR ({records})')}"
    # Past a grace in records, an interval needs no times: only the others are joined with the
    # log, so that the join's hash table holds those (K9's at 10^7 records: millions). DuckDB
    # computes a CTE read twice once; Spark would compute it twice, so there the one join stays.
    return f"""
    WITH c AS ({c}), times AS ({times})
    SELECT * FROM c WHERE {records}
    UNION ALL {joined(f"NOT ({records}) AND ({past})")}
    """


def final_states(d: Dialect) -> str:
    """The registrations of the partitions that exist at the end: the last state of each, and
    the other fields as the last applied record that set each left them (read from the
    records here, so that the timeline's windows do not carry them)."""
    lasts = ", ".join(f"{d.max_by(f, f'CASE WHEN {f} IS NOT NULL THEN off END')} AS {f}" for f in OTHER_FIELDS)
    return f"""
    WITH fin AS (SELECT pk, replicas, dirs, isr, leader, leader_epoch, partition_epoch FROM timeline WHERE end_ IS NULL),
    sets AS (
      SELECT pk, {lasts} FROM partition_rows
      WHERE ({" OR ".join(f"{f} IS NOT NULL" for f in OTHER_FIELDS)})
        AND off NOT IN (SELECT off FROM fills WHERE refused IS NOT NULL)
      GROUP BY pk
    )
    SELECT fin.*, {", ".join(f"sets.{f}" for f in OTHER_FIELDS)}
    FROM fin LEFT JOIN sets ON fin.pk = sets.pk
    """


def in_partition_order(d: Dialect, pk: str) -> tuple[str, str]:
    """(the join with ``lives`` as ``l``, the ORDER BY terms) that sort rows of partition ``pk``
    as the view's image lists partitions: topic id, then partition id (signed, ``pk``'s low 32
    bits)."""
    return f"JOIN lives l ON l.life_index = {d.idiv(pk, 1 << 32)}", f"l.life_topic, {partition_id(d, pk)}"


def partition_id(d: Dialect, pk: str) -> str:
    """The partition id of partition key ``pk``: its low 32 bits, signed."""
    low = f"({pk} - {d.idiv(pk, 1 << 32)} * {1 << 32})"
    return f"CASE WHEN {low} >= {1 << 31} THEN {low} - {1 << 32} ELSE {low} END"


def final_states_ordered(d: Dialect) -> str:
    """``final_states`` in the view's partition order (``in_partition_order``), then lifetime."""
    join, order = in_partition_order(d, "f.pk")
    return f"SELECT f.* FROM ({final_states(d)}) f {join} WHERE f.pk >= 0 ORDER BY {order}, f.pk"


def final_images(d: Dialect, source: str | None = None) -> str:
    """The final states (``final_states_ordered``) as the state hash encodes them: one string a
    partition, a comma then its ``partition_image`` in ``state_hash.CANONICAL``'s JSON (each
    engine's own ``to_json``: compact, fields in the order written, nulls kept), so that the
    column's bytes end to end are what the hash reads (``ControllerView.state_hash_encoded``).

    Only for a log whose topic ids and directory ids are JSON strings as they stand (no quote,
    backslash or control character: ``json_plain``) and whose topics each had one life (one row a
    partition): the driver checks both and otherwise encodes ``final_states_ordered``'s rows.
    ``source``: a query of ``final_states``'s columns, instead of it."""
    join, order = in_partition_order(d, "f.pk")
    # ``PartitionRegistration.assignment``: replicas and directories zipped, as long as the shorter.
    assignment = d.transform_at(
        d.filter_at("f.replicas", lambda _v, i: f"{i} < {d.size('f.dirs')}"),
        lambda v, i: d.struct(("broker", v), ("directory", f"CAST({d.at('f.dirs', f'{i} + 1')} AS STRING)")),
    )
    image = d.to_json(
        d.struct(
            ("topic_id", "l.life_topic"),
            ("partition", partition_id(d, "f.pk")),
            ("replicas", "f.replicas"),
            ("isr", "f.isr"),
            ("leader", "f.leader"),
            ("leader_epoch", "f.leader_epoch"),
            ("partition_epoch", "f.partition_epoch"),
            ("leader_recovery_state", "f.set_lrs"),
            ("assignment", assignment),
            ("removing_replicas", "f.set_removing"),
            ("adding_replicas", "f.set_adding"),
            ("eligible_leader_replicas", "f.set_elr"),
            ("last_known_elr", "f.set_lkelr"),
        )
    )
    return f"""
    SELECT ',' || {image} AS image FROM ({source or final_states(d)}) f {join}
    WHERE f.pk >= 0 ORDER BY {order}
    """


def json_plain(text: str) -> bool:
    """Whether ``text`` is a JSON string's content as it stands: printable ASCII, no quote or
    backslash (topic and directory ids are base64url; ``final_images`` writes them as they are)."""
    return text.isascii() and text.isprintable() and '"' not in text and "\\" not in text


ANY_REFUSED = "SELECT 1 FROM fills WHERE refused IS NOT NULL LIMIT 1"


def refusals(d: Dialect) -> str:
    """The refused partition records (``fills.refused``) with what the driver words them by:
    kind, key, offset, topic id, partition id, the assignment's brokers, the replicas in force."""
    p, c, o = d.q("partition"), d.q("partition_change"), d.q("offset")
    return f"""
    SELECT f.refused, l.{d.q("key")}, f.off, coalesce(l.{p}.topic_id, l.{c}.topic_id),
      coalesce(l.{p}.partition_id, l.{c}.partition_id), f.assign_brokers, f.replicas
    FROM fills f JOIN log l ON l.{o} = f.off
    WHERE f.refused IS NOT NULL
    """
