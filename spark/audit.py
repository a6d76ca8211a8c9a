"""The audit on Spark: the same catalogue, the same report as ``kraftlake audit``.

The partition records (nine in ten of a history) are audited as DataFrame code, no Python in
the hot path: their states come from ``spark.timeline`` (forward fills per partition), each
invariant becomes a message per state (null = right), and runs of wrong states become intervals
(gaps and islands), worded exactly as the local audit words them. Everything else is small and
replayed on the driver by the local audit itself (``spark.control``): broker, topic, feature,
transaction and observation records, L3/L4/L5 of them, K6 and K12. What the partition invariants need
from it goes to every task, broadcast: broker segments become the intervals where a broker is
unregistered or fenced and where each of its directories is offline, and K4/K5 are interval
joins of leaders and ISR members with those; K7 joins directory removals; K8, K10 and K11 take
each broker's UNASSIGNED count (counted in Spark) back to the driver where it changes, K9 the few
partition states it needs.

Graced invariants (K4, K5, K6, K8, K9, K10, K12) are held to the grace last: a wrong state from offset f,
fixed at offset x (or still open at the end), counts when a record in (f, x) is more than
``grace_records`` records or ``grace_ms`` ms after f (times: the records' ``ts_ms``, taken as
non-decreasing in offset order, as Kafka's append times are).

Metadata transactions: both engines audit the published history (``replay.transactions``); the
records of an aborted one are NoOps on the driver and left out of the partition timeline.
"""

from __future__ import annotations

import time
from collections.abc import Callable

import msgspec

from kraftlake.logging import get_logger
from kraftlake.records.kraft import UNASSIGNED
from kraftlake.replay.books import AuditConfig, AuditReport, Violation, violation
from kraftlake.statemachine.invariants import BY_ID
from kraftlake.statemachine.invariants import say as say_text
from kraftlake.statemachine.kraft.view import PartitionRegistration

from .control import ControlPlane, replay_control_plane
from .plan.driver import (
    bad_intervals,
    interval,
    k8_candidates,
    k11_violations,
    partition_entity,
    partition_of,
    report_of,
)
from .replay import keep_offsets
from .scratch import Scratch
from .timeline import (
    KEY,
    OTHER_FIELDS,
    PARTITION_TYPES,
    PK,
    final_fields,
    partition_key,
    partition_timeline,
    topic_lives,
)
from .words import say, severity

log = get_logger(__name__)

CANDIDATE_SCHEMA = "invariant string, entity string, first_offset long, message string, fixed_by long"
"""A graced invariant's candidate interval, before the grace (fixed_by null = still open)."""


# -- gaps and islands ------------------------------------------------------------------------------


def islands(states):
    """Runs of wrong states per partition. ``states``: pk (one per partition lifetime), offset,
    message (null = right), end (where the state stops: the next state, a removal, or null).
    A state missing between two (the one before ends before the next begins) counts as right,
    so a caller may leave out states it knows to be right. One row per run: pk, first_offset,
    message (the first state's), fixed_by (null = still open)."""
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    w = Window.partitionBy(PK).orderBy("offset")
    s = states.withColumn("wrong", F.col("message").isNotNull())
    gap = ~F.lag("end").over(w).eqNullSafe(F.col("offset"))
    s = s.withColumn("flip", ((F.col("wrong") != F.lag("wrong", 1, False).over(w)) | gap).cast("int"))
    s = s.withColumn("island", F.sum("flip").over(w.rowsBetween(Window.unboundedPreceding, 0)))
    runs = (
        s.where("wrong")
        .groupBy(PK, "island")
        .agg(F.min(F.struct("offset", "message")).alias("first"), F.max(F.struct("offset", "end")).alias("last"))
    )
    return runs.select(
        PK,
        F.col("first.offset").alias("first_offset"),
        F.col("first.message").alias("message"),
        F.col("last.end").alias("fixed_by"),
    )


def _dir_of(b):
    """The directory of replica ``b`` in a partition state (null when ``b`` is not a replica)."""
    from pyspark.sql import functions as F

    return F.when(
        F.array_contains("replicas", b), F.try_element_at("dirs", F.array_position("replicas", b).cast("int"))
    )


def _instants(df) -> list[Violation]:
    return [Violation(**{**r.asDict(), "evidence": list(r["evidence"])}) for r in df.collect()]


def _partition_instants(df, lives) -> list[Violation]:
    """Instant violations of partitions (rows with ``PK`` and the violation's other fields)."""
    out = []
    for r in df.collect():
        d = r.asDict()
        out.append(
            Violation(
                **{k: v for k, v in d.items() if k not in (PK, "evidence")},
                entity=partition_entity(lives, d[PK]),
                evidence=list(d["evidence"]),
            )
        )
    return out


# -- K1, K3 ----------------------------------------------------------------------------------------


def k1_message(isr, replicas, leader):
    """K1's message for a state (null when right), worded as ``leader_in_isr_in_replicas``."""
    from pyspark.sql import functions as F

    # Higher-order functions run interpreted: the cheap (generated) ``array_except`` decides, and
    # ``filter`` keeps the order and repeats of the message only for the few wrong states.
    outside = F.filter(isr, lambda b: ~F.array_contains(replicas, b))
    return (
        F.when(F.size(isr) == 0, say("K1", "empty_isr"))
        .when(
            F.size(F.array_except(isr, replicas)) > 0,
            say("K1", "isr_outside_replicas", isr=isr, outside=outside, replicas=replicas),
        )
        .when((leader != -1) & ~F.array_contains(isr, leader), say("K1", "leader_outside_isr", leader=leader, isr=isr))
    )


def k1_violations(timeline, lives) -> list[Violation]:
    from pyspark.sql import functions as F

    # Only the wrong states: islands reads the gaps between them as right.
    states = timeline.where(F.col("k1").isNotNull()).select(PK, "offset", "end", F.col("k1").alias("message"))
    return [
        interval("K1", partition_entity(lives, r[PK]), r["first_offset"], r["message"], r["fixed_by"])
        for r in islands(states).collect()
    ]


def _metadata_version(levels: list[tuple[int, int]]):
    """A column: the metadata.version in force before each row, from the FeatureLevel records
    (few) folded into a CASE on the offset."""
    from pyspark.sql import functions as F

    from kraftlake.statemachine.kraft.features import MV_3_0_IV1

    expr = F.lit(MV_3_0_IV1)
    for offset, level in levels:
        expr = F.when(F.col("offset") > offset, F.lit(level)).otherwise(expr)
    return expr


def k3_message(levels: list[tuple[int, int]]):
    """K3's message for a state (null when right): a change that removes a replica (or, before
    3.6-IV0, shrinks the ISR) without a leader-epoch bump; a PartitionRecord rewriting a
    partition whose epochs do not move. Null for a partition's first state."""
    from pyspark.sql import functions as F

    from kraftlake.statemachine.kraft.features import MV_3_6_IV0

    mv = _metadata_version(levels)
    lost = F.filter("old_replicas", lambda b: ~F.array_contains(F.col("replicas"), b))
    shrunk = F.filter("old_isr", lambda b: ~F.array_contains(F.col("isr"), b))
    change = ~F.col("is_record")
    same_le = F.col("leader_epoch") == F.col("old_leader_epoch")
    return F.when(
        F.col("old_replicas").isNotNull(),
        (
            F.when(
                change & same_le & (F.size(F.array_except("old_replicas", "replicas")) > 0),
                say("K3", "replicas_left", lost=lost),
            )
            .when(
                change & same_le & (mv < MV_3_6_IV0) & (F.size(F.array_except("old_isr", "isr")) > 0),
                say("K3", "isr_shrunk", shrunk=shrunk),
            )
            .when(
                ~change & (F.col("partition_epoch") <= F.col("old_partition_epoch")),
                say("K3", "partition_epoch_stuck", new=F.col("partition_epoch"), old=F.col("old_partition_epoch")),
            )
            .when(
                ~change
                & (F.col("leader") != F.col("old_leader"))
                & (F.col("leader_epoch") <= F.col("old_leader_epoch")),
                say(
                    "K3",
                    "leader_epoch_stuck",
                    old=F.col("old_leader"),
                    new=F.col("leader"),
                    epoch=F.col("leader_epoch"),
                ),
            )
        ),
    )


def k3_violations(timeline):
    """K3, instant, from the states' ``k3`` (``k3_message``)."""
    from pyspark.sql import functions as F

    return timeline.where(F.col("k3").isNotNull()).select(
        F.lit("K3").alias("invariant"),
        severity("K3").alias("severity"),
        PK,
        F.col("offset").alias("first_offset"),
        F.col("offset").alias("last_offset"),
        F.col("k3").alias("message"),
        F.array("offset").alias("evidence"),
    )


def _unassigned(replicas, dirs):
    """The brokers of ``replicas`` whose directory in ``dirs`` is UNASSIGNED."""
    from pyspark.sql import functions as F

    return F.filter(replicas, lambda b, i: F.try_element_at(dirs, (i + 1).cast("int")) == UNASSIGNED)


def state_facts(levels: list[tuple[int, int]]):
    """What the invariants read of each partition state, made in the pass that fills the states
    (``partition_timeline``'s ``keep``): the state itself (leader, ISR, replicas, directories),
    K1's and K3's messages, and what the states before are needed for (whether replicas or
    directories moved, the replicas that left, the UNASSIGNED replicas before and after), so
    that the scratch holds three arrays per state instead of six. Epochs are kept on the
    partitions' final states only (the state hash's), the registration's other fields as each
    record set them (``timeline.final_fields`` folds them for the final states)."""
    from pyspark.sql import functions as F

    def keep(t):
        moved = ~F.col("replicas").eqNullSafe(F.col("old_replicas")) | ~F.col("dirs").eqNullSafe(F.col("old_dirs"))
        touched = F.array_contains("dirs", UNASSIGNED) | F.array_contains(
            F.coalesce("old_dirs", F.array().cast("array<string>")), UNASSIGNED
        )
        final = F.col("end").isNull()
        return [
            PK,
            "offset",
            "end",
            "removed",
            "leader",
            "isr",
            "replicas",
            "dirs",
            k1_message(F.col("isr"), F.col("replicas"), F.col("leader")).alias("k1"),
            k3_message(levels).alias("k3"),
            moved.alias("moved"),
            F.when(moved, F.array_except(F.coalesce("old_replicas", F.array().cast("array<int>")), "replicas")).alias(
                "left"
            ),
            F.when(touched, _unassigned(F.col("replicas"), F.col("dirs"))).alias("u"),
            F.when(
                touched, F.coalesce(_unassigned(F.col("old_replicas"), F.col("old_dirs")), F.array().cast("array<int>"))
            ).alias("old_u"),
            F.col("old_replicas").isNotNull().alias("changed"),
            *[F.when(final, F.col(c)).alias(c) for c in ("leader_epoch", "partition_epoch")],
            *[s for s, _ in OTHER_FIELDS],
        ]

    return keep


# -- the brokers' side: K4, K5, K7 -----------------------------------------------------------------


def _members(timeline):
    """A row per partition state and its leader (``role`` L, ``pos`` 0; ``dir`` null when the
    leader is not a replica) and per ISR member on a replica's directory (``role`` I, ``pos``
    its place in the ISR), K5's last replica standing left out: one scan of the timeline."""
    from pyspark.sql import functions as F

    none = F.array().cast("array<int>")
    has_leader = (F.col("leader") != -1).cast("int")
    isr = F.when(~((F.size("isr") == 1) & (F.col("leader") == -1)), F.col("isr")).otherwise(none)
    m = timeline.select(
        PK,
        "offset",
        "end",
        "replicas",
        "dirs",
        has_leader.alias("n_leader"),
        F.posexplode(F.concat(F.when(has_leader == 1, F.array("leader")).otherwise(none), isr)).alias("i", "broker"),
    )
    leads = F.col("i") < F.col("n_leader")
    m = m.select(
        PK,
        "offset",
        "end",
        F.when(leads, F.lit("L")).otherwise(F.lit("I")).alias("role"),
        F.when(leads, F.lit(0)).otherwise(F.col("i") - F.col("n_leader")).alias("pos"),
        "broker",
        _dir_of(F.col("broker")).alias("dir"),
    )
    return m.where((F.col("role") == "L") | F.col("dir").isNotNull())


def offset_bucket(last: int) -> int:
    """The width of the offset buckets interval joins are cut into: a 64th of the log, at least
    2^20 records (a partition state spans about as many records as there are partitions, so a
    state falls in one bucket or two)."""
    return max(1 << 20, (last + 1) // 64)


def _buckets(lo, hi, width: int):
    """The offset buckets [lo, hi] touches (``hi`` inclusive)."""
    from pyspark.sql import functions as F

    first = F.floor(F.greatest(lo, F.lit(0)) / width).cast("long")
    return F.sequence(first, F.greatest(first, F.floor(hi / width).cast("long")))


ANY_DIR = "*"
"""A broker's bad interval that holds for all its directories (unregistered, fenced): never a
directory id (a uuid's 22 characters, checked on every decode)."""


def _bad_overlaps(members, bad, known: list[int], width: int, last: int):
    """Members (``_members``) joined with the bad intervals (broadcast) they overlap: a leader
    with its broker's (``bad_dir`` ``ANY_DIR``) and its directory's, an ISR member with its
    directory's; a leader on a broker that never registered (not in ``known``) is unregistered
    for its whole state. ``reason``, and ``s``/``e`` the overlap.

    One scan of the members and one join on (broker, directory, offset bucket): both sides are
    cut into offset buckets ``width`` records wide, so that a row is checked against the bad
    intervals near it only (a broker's or directory's bad intervals grow with the history: a join
    on the keys alone checked every row against all of them: quadratic in a key's history). A
    pair is kept in the one bucket where its overlap begins. A left join, so that the leaders of
    unknown brokers (no bad interval: never registered) come from the same pass."""
    from pyspark.sql import functions as F

    end = F.coalesce(F.col("end") - 1, F.lit(last))
    probes = F.when(F.col("role") == "I", F.array("dir")).when(F.col("dir").isNull(), F.array(F.lit(ANY_DIR)))
    rows = members.select(
        "*",
        F.explode(_buckets(F.col("offset"), end, width)).alias("bucket"),
        F.explode(F.coalesce(probes, F.array("dir", F.lit(ANY_DIR)))).alias("probe"),
    )
    stop = F.coalesce(F.col("stop") - 1, F.lit(last))
    bad = bad.select("*", F.explode(_buckets(F.col("start"), stop, width)).alias("bad_bucket"))
    s = F.greatest(rows["offset"], bad["start"])
    cond = [
        rows["broker"] == bad["bad_broker"],
        rows["probe"] == bad["bad_dir"],
        rows["bucket"] == bad["bad_bucket"],
        (rows["end"].isNull() | (bad["start"] < rows["end"])) & (bad["stop"].isNull() | (bad["stop"] > rows["offset"])),
        F.floor(s / width).cast("long") == rows["bucket"],
    ]
    j = rows.join(F.broadcast(bad), cond, "left")
    matched = bad["start"].isNotNull()
    first_bucket = F.floor(F.greatest(rows["offset"], F.lit(0)) / width).cast("long")
    unknown = (rows["role"] == "L") & (rows["probe"] == ANY_DIR) & (rows["bucket"] == first_bucket)
    if known:
        unknown = unknown & ~rows["broker"].isin(known)
    return j.where(matched | unknown).select(
        *[rows[c] for c in members.columns],
        F.coalesce(bad["reason"], F.lit("unregistered")).alias("reason"),
        F.when(matched, s).otherwise(rows["offset"]).alias("s"),
        F.when(matched, F.least(rows["end"], bad["stop"])).otherwise(rows["end"]).alias("e"),
    )


def k4_k5_violations(
    spark, timeline, broker_bad, dir_bad, known, lives, last: int, removals: list[tuple[int, int, str]]
) -> tuple[list[dict], list[Violation]]:
    """K4 and K5 as candidate intervals (before the grace): wrong states of each partition at
    its own records and wherever a leader's or ISR member's broker or directory went bad or
    good in between; and K7's violations at the directory ``removals`` (``k7_violations``),
    from the same leaders and ISR members on offline directories."""
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    bad = spark.createDataFrame(
        [(b, ANY_DIR, start, stop, reason) for b, start, stop, reason in broker_bad]
        + [(b, d, start, stop, "offline") for b, d, start, stop in dir_bad],
        "bad_broker int, bad_dir string, start long, stop long, reason string",
    )
    j = _bad_overlaps(_members(timeline), bad, known, offset_bucket(last), last).cache()
    # Where the answer can change: the start of each state with a bad overlap, and the overlaps'
    # edges inside it. Other states are right for K4/K5 and left out (islands reads the gap they
    # leave as right). An overlap lies within the state its member belongs to, so a point is
    # matched with its own state's overlaps only (joined by partition and state: by partition
    # alone, the pairs grew with the square of a partition's states).
    rows = j.select(PK, F.col("offset").alias("t"), F.col("offset").alias("state"), F.col("end").alias("row_end"))
    edges = j.select(
        PK, F.col("s").alias("t"), F.col("offset").alias("state"), F.col("end").alias("row_end")
    ).unionByName(
        j.where(F.col("e").isNotNull() & (F.col("end").isNull() | (F.col("e") < F.col("end")))).select(
            PK, F.col("e").alias("t"), F.col("offset").alias("state"), F.col("end").alias("row_end")
        )
    )
    points = rows.unionByName(edges).dropDuplicates([PK, "t"])
    overlaps = j.select(PK, F.col("offset").alias("state"), "s", "e", "role", "pos", "broker", "dir", "reason")
    cover = points.join(
        overlaps,
        [
            points[PK] == overlaps[PK],
            points["state"] == overlaps["state"],
            overlaps["s"] <= points["t"],
            overlaps["e"].isNull() | (points["t"] < overlaps["e"]),
        ],
        "left",
    ).select(points[PK], "t", "row_end", "role", "pos", "broker", "dir", "reason")
    rank = F.when(F.col("reason") == "unregistered", 0).when(F.col("reason") == "fenced", 1).otherwise(2)
    agg = cover.groupBy(PK, "t", "row_end").agg(
        F.min(F.when(F.col("role") == "L", F.struct(rank.alias("rank"), "broker", "dir"))).alias("k4"),
        F.array_sort(F.collect_list(F.when(F.col("role") == "I", F.struct("pos", "broker", "dir")))).alias("k5"),
    )
    b4 = F.col("k4.broker")
    k4 = (
        F.when(F.col("k4.rank") == 0, say("K4", "unregistered", leader=b4))
        .when(F.col("k4.rank") == 1, say("K4", "fenced", leader=b4))
        .when(F.col("k4.rank") == 2, say("K4", "offline_dir", leader=b4, directory=F.col("k4.dir")))
    )
    members = F.transform("k5", lambda m: say("K5", "member", broker=m["broker"], directory=m["dir"]))
    k5 = F.when(F.size("k5") > 0, say("K5", "offline_members", members=F.array_join(members, ", ")))
    w = Window.partitionBy(PK).orderBy("t")
    states = agg.select(
        PK,
        F.col("t").alias("offset"),
        F.least(F.lead("t").over(w), F.col("row_end")).alias("end"),
        k4.alias("k4"),
        k5.alias("k5"),
    ).cache()
    out = []
    for inv in ("K4", "K5"):
        for r in islands(states.select(PK, "offset", "end", F.col(inv.lower()).alias("message"))).collect():
            out.append(
                {
                    "invariant": inv,
                    "entity": partition_entity(lives, r[PK]),
                    "first_offset": r["first_offset"],
                    "message": r["message"],
                    "fixed_by": r["fixed_by"],
                }
            )
    states.unpersist()
    k7 = k7_violations(spark, j.where(F.col("reason") == "offline"), removals, lives)
    j.unpersist()
    return out, k7


def k7_violations(spark, offline, removals: list[tuple[int, int, str]], lives) -> list[Violation]:
    """K7, instant: at each BrokerRegistrationChange that takes directory d from broker b, the
    partitions still led from b's replica on d, or keeping it in the ISR.

    ``offline``: K4/K5's rows of leaders and ISR members on an offline directory (with their
    overlap). A change that takes d away leaves b's other directories registered (an empty list
    changes nothing), so d is offline from the change on (``bad_intervals``): every member on d
    when it is taken is among them, and the timeline is not exploded into members again."""
    from pyspark.sql import functions as F

    if not removals:
        return []
    members = offline.select(
        PK, "offset", "end", "broker", "dir", F.when(F.col("role") == "L", 0).otherwise(1).alias("role")
    )
    gone = spark.createDataFrame(removals, "at long, bad_broker int, bad_dir string")
    j = members.join(
        F.broadcast(gone),
        (members["broker"] == gone["bad_broker"])
        & (members["dir"] == gone["bad_dir"])
        & (members["offset"] < gone["at"])
        & (members["end"].isNull() | (gone["at"] < members["end"])),
    )
    hits = j.groupBy(PK, "at", "broker", "dir").agg(F.min("role").alias("role"))
    out = []
    for r in hits.collect():
        message = say_text("K7", "leads" if r["role"] == 0 else "in_isr", broker=r["broker"], directory=r["dir"])
        out.append(violation("K7", partition_entity(lives, r[PK]), r["at"], r["at"], message, [r["at"]]))
    return out


# -- K8-K11: UNASSIGNED counts per broker, reported directories -----------------------------------


def unassigned_counts(spark, timeline, broker_events: list[tuple[int, int]]) -> list[tuple[int, int, int]]:
    """(offset, broker, count): the number of a broker's replicas in UNASSIGNED where K8 is
    checked: where it goes from zero to some or back, and at each of the broker's records
    (``broker_events``), from the gains and losses of each partition's changes and its topic's
    removal, counted per broker in Spark."""
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    # Only states with an UNASSIGNED directory, before or after, gain or lose one (``state_facts``).
    t = timeline.where(F.col("u").isNotNull()).select("offset", "end", "removed", "u", "old_u")
    gained = t.select("offset", F.explode(F.array_except("u", "old_u")).alias("broker"), F.lit(1).alias("step"))
    lost = t.select("offset", F.explode(F.array_except("old_u", "u")).alias("broker"), F.lit(-1).alias("step"))
    removed = t.where(F.col("removed").isNotNull() & (F.col("end") == F.col("removed"))).select(
        F.col("removed").alias("offset"), F.explode("u").alias("broker"), F.lit(-1).alias("step")
    )
    steps = gained.unionByName(lost).unionByName(removed).groupBy("broker", "offset").agg(F.sum("step").alias("step"))
    events = spark.createDataFrame(broker_events or [(-1, -1)], "offset long, broker int")
    steps = steps.withColumn("event", F.lit(False)).unionByName(
        events.select("broker", "offset", F.lit(0).cast("long").alias("step"), F.lit(True).alias("event"))
    )
    w = Window.partitionBy("broker").orderBy("offset").rowsBetween(Window.unboundedPreceding, 0)
    counts = steps.withColumn("after", F.sum("step").over(w))
    wanted = counts.where(F.col("event") | ((F.col("after") == 0) != (F.col("after") - F.col("step") == 0)))
    return sorted((r["offset"], r["broker"], r["after"]) for r in wanted.select("offset", "broker", "after").collect())


def k9_candidates(spark, df, timeline, plane: ControlPlane):
    """K9 as candidate intervals (a DataFrame of ``CANDIDATE_SCHEMA``'s fields, None when no
    request was accepted), in DataFrame code: a replica directory its broker reported
    (and the controller accepted) that the partition does not record, until a change records it
    or moves the replica away. A report that disagrees with the partition at its offset is
    *effective*; it holds until the first state in which the replica is recorded there or is
    gone, or until the next effective report of the same replica (which then continues the
    same wrong interval with its own directory, as the local audit's pending map does)."""
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    if not plane.accepted_assignments:
        return None
    accepted = spark.createDataFrame([(o,) for o in plane.accepted_assignments], "offset long")
    req = (
        df.where(F.col("type") == "AssignReplicasToDirsRequest")
        .join(F.broadcast(accepted), "offset")
        .select(
            F.col("offset").alias("at"),
            F.col("assign_replicas_to_dirs_request.broker_id").alias("broker"),
            F.posexplode("assign_replicas_to_dirs_request.directories").alias("dpos", "d"),
        )
    )
    req = req.select(
        "at", "broker", "dpos", F.col("d.id").alias("reported"), F.posexplode("d.topics").alias("tpos", "tp")
    )
    asks = req.select(
        "at",
        "broker",
        "reported",
        "tp.topic_id",
        F.concat(F.lit("partition/"), F.col("tp.topic_id"), F.lit("/")).alias("prefix"),
        (F.col("dpos") * 1_000_000 + F.col("tpos") * 1_000).alias("pos0"),
        F.posexplode("tp.partitions").alias("ppos", "pid"),
    ).select(
        "at",
        "broker",
        "reported",
        "topic_id",
        F.col("pid").alias("partition_id"),
        F.concat("prefix", F.col("pid").cast("string")).alias(KEY),
        (F.col("pos0") + F.col("ppos")).alias("seq"),
    )  # the order the local audit walks a request in: directories, topics, partitions
    # Each report's partition lifetime (its topic's at the report), numbered as the timeline's.
    lives = topic_lives(spark, plane.topics)
    asks = asks.join(
        F.broadcast(lives),
        (asks["topic_id"] == lives["life_topic"])
        & (asks["at"] > lives["life"])
        & (lives["removed"].isNull() | (asks["at"] < lives["removed"])),
    )
    asks = asks.select(
        "at", "broker", "reported", KEY, "seq", partition_key(F.col("life_index"), F.col("partition_id")).alias(PK)
    )
    # Where a replica's directory can change: states whose replicas or directories move (most
    # changes move only the leader or the ISR), a row for each broker that is a replica there
    # (``dir``) or just stopped being one (``dir`` null), beside the reports, per replica.
    brokers = F.array_union("replicas", F.coalesce("left", F.array().cast("array<int>")))
    states = timeline.where("moved").select(PK, "offset", "replicas", "dirs", F.explode(brokers).alias("broker"))
    nothing = F.lit(None).cast("string")
    both = states.select(
        PK,
        "broker",
        F.col("offset").alias("pos"),
        F.lit(-1).cast("long").alias("seq"),
        _dir_of(F.col("broker")).alias("dir"),
        nothing.alias("reported"),
        nothing.alias(KEY),
    ).unionByName(
        asks.select(
            PK, "broker", F.col("at").alias("pos"), F.col("seq").cast("long"), nothing.alias("dir"), "reported", KEY
        )
    )
    report = F.col("reported").isNotNull()
    w = Window.partitionBy(PK, "broker").orderBy("pos", "seq")
    # A report is effective where the last state before it has the broker as a replica in
    # another directory (the local audit skips the others, leaving what it waits for alone).
    last_state = F.last(F.when(~report, F.struct(F.col("dir").alias("d"))), ignorenulls=True)
    t = both.select("*", last_state.over(w.rowsBetween(Window.unboundedPreceding, -1))["d"].alias("recorded"))
    t = t.where(~report | (F.col("recorded").isNotNull() & (F.col("recorded") != F.col("reported"))))
    # Each effective report opens a segment (same partitioning and order: no new sort); the
    # first state in it that records the reported directory or drops the replica fixes it.
    upto = w.rowsBetween(Window.unboundedPreceding, 0)
    t = t.select(
        "*",
        F.sum(report.cast("int")).over(upto).alias("segment"),
        F.last(F.when(report, F.col("reported")), ignorenulls=True).over(upto).alias("waits_for"),
    )
    fixes = ~report & (F.col("dir").isNull() | (F.col("dir") == F.col("waits_for")))
    segments = (
        t.where(F.col("segment") > 0)
        .groupBy(PK, "broker", "segment")
        .agg(
            F.min(F.when(report, F.struct(F.col("pos").alias("at"), "seq", "reported", "recorded", KEY))).alias(
                "report"
            ),
            F.min(F.when(fixes, F.col("pos"))).alias("fix"),
        )
    )
    # A report no state fixed before the next one continues the same wrong interval.
    ws = Window.partitionBy(PK, "broker").orderBy("segment")
    e = segments.withColumn("starts", F.coalesce(F.lag("fix").over(ws).isNotNull(), F.lit(True)).cast("int"))
    e = e.withColumn("island", F.sum("starts").over(ws.rowsBetween(Window.unboundedPreceding, 0)))
    runs = e.groupBy(PK, "broker", "island").agg(
        F.min("report").alias("first"), F.max(F.struct("segment", "fix")).alias("last")
    )
    # Left as a DataFrame: most runs are the brief wait of a new replica's report for its
    # recording (10^6 of them in a 10^7-record history) and end within the grace.
    broker = F.col("broker").cast("string")
    key = F.col(f"first.{KEY}")
    return runs.select(
        F.lit("K9").alias("invariant"),
        F.concat(F.lit("replica/"), key.substr(F.lit(len("partition/") + 1), F.length(key)), F.lit("/"), broker).alias(
            "entity"
        ),
        F.col("first.at").alias("first_offset"),
        say(
            "K9", "unrecorded", broker=broker, reported=F.col("first.reported"), recorded=F.col("first.recorded")
        ).alias("message"),
        F.col("last.fix").alias("fixed_by"),
    )


# -- the grace -------------------------------------------------------------------------------------


def held_to_grace(
    spark, df, candidates: list[dict], config: AuditConfig, last_offset: int, more=None
) -> list[Violation]:
    """The candidate intervals of graced invariants that lasted beyond the grace, as violations:
    ``candidates`` from the driver and ``more`` (a DataFrame of the same fields, or None), held
    to the grace in Spark, where the records' times are (only the violations are collected)."""
    from pyspark.sql import functions as F

    c = spark.createDataFrame(
        [tuple(x[k] for k in ("invariant", "entity", "first_offset", "message", "fixed_by")) for x in candidates],
        CANDIDATE_SCHEMA,
    )
    if more is not None:
        c = c.unionByName(more)
    c = c.withColumn("hi", F.coalesce(F.col("fixed_by") - 1, F.lit(last_offset))).where(
        F.col("hi") > F.col("first_offset")
    )
    # Two sort-merge joins with every record's time: one join of both ends followed by an
    # aggregate per interval measured slower, its shuffle costing more than the second join
    # (bench/RESULTS.md).
    times = df.select("offset", "ts_ms")
    c = c.join(times.select(F.col("offset").alias("first_offset"), F.col("ts_ms").alias("t0")), "first_offset", "left")
    c = c.join(times.select(F.col("offset").alias("hi"), F.col("ts_ms").alias("t1")), "hi", "left")
    held = (F.col("hi") - F.col("first_offset") > config.grace_records) | (F.col("t1") - F.col("t0") > config.grace_ms)
    return [
        interval(r["invariant"], r["entity"], r["first_offset"], r["message"], r["fixed_by"])
        for r in c.where(held).select("invariant", "entity", "first_offset", "message", "fixed_by").collect()
    ]


# -- the whole audit -------------------------------------------------------------------------------


CONTROL_WINDOW = 500_000
"""Control records per collect at most (about): an S3Stream or BookKeeper history is nearly all
control records, and an S3Stream record's blob is ~600 bytes, so the driver holds a window's
worth at a time, not the log's."""


def _control_records(df, first: int | None, last: int | None, count: int, window: int = CONTROL_WINDOW):
    """The ``count`` non-partition records of offsets ``first..last``, decoded, in offset order:
    collected through Arrow a range of offsets at a time, each range holding about ``window`` of
    them (row groups carry offset statistics: a collect reads only its range's)."""
    from pyspark.sql import functions as F

    from kraftlake.records.arrow import from_table

    if not count or first is None or last is None:
        return
    control = df.where(~F.col("type").isin(*PARTITION_TYPES)).select("offset", "record")
    ranges = -(-count // window)
    span = -(-(last - first + 1) // ranges)
    for lo in range(first, last + 1, span):
        table = control.where(F.col("offset").between(lo, lo + span - 1)).toArrow()
        if table.num_rows:
            yield from from_table(table.sort_by("offset"))


def _final_partitions(timeline, lives) -> list[PartitionRegistration]:
    """The registrations of the partitions that exist at the end (their last state)."""
    from pyspark.sql import functions as F

    cols = (
        "replicas",
        "dirs",
        "isr",
        "removing_replicas",
        "adding_replicas",
        "leader",
        "leader_recovery_state",
        "leader_epoch",
        "partition_epoch",
        "eligible_leader_replicas",
        "last_known_elr",
    )
    final = timeline.where(F.col("end").isNull()).select(
        PK, "replicas", "dirs", "isr", "leader", "leader_epoch", "partition_epoch"
    )
    rows = final.join(final_fields(timeline), PK, "left").select(PK, *cols).collect()
    return [
        PartitionRegistration(*partition_of(lives, r[0]), *(tuple(v) if isinstance(v, list) else v for v in r[1:]))
        for r in rows
    ]


def l1_violations(df, first: int, last: int, count: int) -> list[Violation]:
    """L1: offsets gapless and increasing. A Delta log written by kraftlake always is; only a
    table written by something else needs the (global) sort that finds the gaps."""
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    if count == 0 or last - first + 1 == count:
        return []
    w = Window.orderBy("offset")
    gaps = df.select("offset", F.lag("offset").over(w).alias("prev")).where(F.col("offset") != F.col("prev") + 1)
    return [
        violation(
            "L1",
            "log",
            r["offset"],
            r["offset"],
            say_text("L1", "gap", offset=r["offset"], last=r["prev"]),
            [r["offset"]],
        )
        for r in gaps.collect()
    ]


def audit(
    spark,
    df,
    config: AuditConfig | None = None,
    *,
    step: Callable[[str], None] | None = None,
    scratch: str | None = None,
) -> AuditReport:
    """Audit a log DataFrame (``read_log``) on Spark: the report ``kraftlake audit`` gives for
    the same records. ``step(name)`` is told as each stage begins (for progress). ``scratch``:
    a directory every executor sees, for the partition timeline (``spark.scratch``; default: a
    local temporary one for a local session, the checkpoint directory on a cluster)."""
    from pyspark.sql import functions as F

    config = config or AuditConfig()
    tell = step or (lambda _name: None)
    started = time.perf_counter()
    tell("scanning the log")
    stats = df.agg(
        F.count("*").alias("n"),
        F.min("offset").alias("lo"),
        F.max("offset").alias("hi"),
        F.count_if(~F.col("type").isin(*PARTITION_TYPES)).alias("control"),
    ).first()
    n, first, last = stats["n"], stats["lo"], stats["hi"]
    tell("replaying brokers, topics and observations on the driver")
    plane = replay_control_plane(_control_records(df, first, last, stats["control"]), config)
    tell("forward-filling partition states")
    lives = plane.topics
    with Scratch(spark, scratch) as kept:
        # Aborted (or unfinished) metadata transactions are audited as NoOps: their partition
        # records are no state (``replay.transactions``).
        ranges = plane.unpublished + ([] if plane.unfinished is None else [(plane.unfinished, last)])
        states = df.where(keep_offsets(ranges)) if ranges else df
        timeline, refused = partition_timeline(states, topic_lives(spark, lives), state_facts(plane.mv_levels), kept)
        found: list[Violation] = [v for v in plane.violations if not BY_ID[v.invariant].graced]
        candidates: list[dict] = [
            {
                "invariant": v.invariant,
                "entity": v.entity,
                "first_offset": v.first_offset,
                "message": v.message,
                "fixed_by": None if v.last_offset is None else v.last_offset + 1,
            }
            for v in plane.violations
            if BY_ID[v.invariant].graced
        ]
        found += l1_violations(df, first, last, n) if n else []
        found += _instants(refused)
        tell("K1: leader in ISR in replicas")
        found += k1_violations(timeline, lives)
        tell("K3: epochs")
        found += _partition_instants(k3_violations(timeline), lives)
        tell("K4/K5, K7: leaders and ISR on online brokers and directories, directory removals")
        referenced = _referenced_dirs(states)
        broker_bad, dir_bad, known = bad_intervals(plane, referenced)
        k4_k5, k7 = k4_k5_violations(
            spark, timeline, broker_bad, dir_bad, known, lives, last if last is not None else 0, plane.dir_removals
        )
        candidates += k4_k5
        found += k7  # K7: directory removals, from K4/K5's members on offline directories
        tell("K8-K11: UNASSIGNED replicas, reported directories, requests to serve")
        counts = unassigned_counts(
            spark, timeline, sorted(plane.broker_events + [(o, b) for o, b, _ in plane.unfence_requests])
        )
        candidates += k8_candidates(plane, counts)
        found += k11_violations(plane, counts)
        k9 = k9_candidates(spark, df, timeline, plane)
        tell("holding graced states to the grace")
        found += held_to_grace(spark, df, candidates, config, last if last is not None else -1, k9)
        tell("state hash")
        view = plane.view
        for p in _final_partitions(timeline, lives):
            view.partitions.setdefault(p.topic_id, {})[p.partition_id] = p
        counts = timeline.agg(F.count("*").alias("rows"), F.count_if("changed").alias("changes")).first()
    found.sort(key=lambda v: (v.first_offset, v.invariant, v.entity))
    report = report_of(config, found, plane, n, first, last, view.state_hash(), counts)
    log.info("spark.audit", records=n, violations=len(found), seconds=round(time.perf_counter() - started, 2))
    return report


def _referenced_dirs(df) -> dict[int, set[str]]:
    """Broker -> the directories partition records placed its replicas in."""
    from pyspark.sql import functions as F

    assign = F.coalesce(F.col("partition.assignment"), F.col("partition_change.assignment"))
    pairs = (
        df.where(F.col("type").isin(*PARTITION_TYPES) & (F.size(assign) > 0))
        .select(F.explode(assign).alias("a"))
        .select("a.broker", "a.directory")
        .distinct()
        .collect()
    )
    out: dict[int, set[str]] = {}
    for b, d in pairs:
        out.setdefault(b, set()).add(d)
    return out


def violations(spark, df, config: AuditConfig | None = None) -> list[dict]:
    """The audit's violations as dicts in ``kraftlake audit``'s JSON shape."""
    return [msgspec.to_builtins(v) for v in audit(spark, df, config).violations]
