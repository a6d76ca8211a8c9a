"""``kraftlake simulate``: a seeded JBOD cluster driven by the controller's and the brokers'
deciders, with faults and optionally a faulty controller or broker, written as JSON Lines."""

from __future__ import annotations

import dataclasses
from enum import Enum
from pathlib import Path

import typer

from kraftlake.cli.console import EXIT_INPUT, abort, err


class Family(str, Enum):
    kraft = "kraft"
    s3stream = "s3stream"
    bookkeeper = "bookkeeper"


def _write(out_file: Path, make_batches, family: str, bug: str | None) -> None:
    """Write a workload's batches as JSON Lines; a bad option is exit 2 with its message."""
    from kraftlake.records import encode_line

    n = 0
    try:
        batches = make_batches()
        with out_file.open("wb") as fh:
            for batch in batches:
                fh.write(b"".join(encode_line(r) + b"\n" for r in batch))
                n += len(batch)
    except ValueError as exc:
        abort(str(exc), EXIT_INPUT)
    err.print(f"wrote {n:,} {family} records to {out_file}" + (f" (injected bug: {bug})" if bug else ""))


def _simulate_bookkeeper(seed: int, records: int, out_file: Path, bug: str | None, bookies: int, careful: bool) -> None:
    from kraftlake.statemachine.bookkeeper.workload import WorkloadConfig, generate

    config = lambda: WorkloadConfig(bookies=bookies, seed=seed, bug=bug, careful_faults=careful)  # noqa: E731
    _write(out_file, lambda: generate(config(), records=records), "BookKeeper", bug)


def _simulate_s3stream(
    seed: int, records: int, out_file: Path, bug: str | None, nodes: int, streams: int, ops: str | None, ttl_ms: int
) -> None:
    from kraftlake.statemachine.s3stream.workload import OPERATIONS, WorkloadConfig, generate

    def batches():
        config = WorkloadConfig(nodes=nodes, streams=streams, seed=seed, bug=bug, ttl_ms=ttl_ms)
        if ops:
            chosen = [o.strip() for o in ops.split(",") if o.strip()]
            unknown = sorted(set(chosen) - set(OPERATIONS))
            if unknown:
                raise ValueError(
                    f"--ops: unknown operation(s) {', '.join(unknown)}: choose from {', '.join(OPERATIONS)}"
                )
            config = dataclasses.replace(config, weights={o: w for o, w in config.weights.items() if o in chosen})
        return generate(config, records=records)

    _write(out_file, batches, "S3Stream", bug)


def register(app: typer.Typer) -> None:
    @app.command("simulate")
    def simulate(
        seed: int = typer.Option(..., "--seed", help="Same seed and options, byte-identical output."),
        records: int = typer.Option(10_000, "--records", "-n", min=1, help="Stop after at least this many records."),
        out_file: Path = typer.Option(
            ..., "--out", "-o", help="JSON Lines file to write (appendable with `kraftlake append`)."
        ),
        brokers: int = typer.Option(6, "--brokers", min=1),
        dirs_per_broker: int = typer.Option(3, "--dirs-per-broker", min=1),
        partitions: int = typer.Option(60, "--partitions", min=1),
        topics: int = typer.Option(5, "--topics", min=1),
        replication: int = typer.Option(3, "--replication", min=1),
        faults: str = typer.Option(
            "dir-failure,controlled-shutdown,broker-crash",
            "--faults",
            help="Comma-separated: dir-failure, controlled-shutdown, broker-crash, reassign, alter-min-isr (an operator changes min.insync.replicas; with ELR on the controller writes ClearElr), elect-leaders (preferred elections, or unclean ones of leaderless partitions), cancel-reassign (a move cancelled before it completes), create-partitions (a topic grows), delete-topic (a topic deleted, a new one created).",
        ),
        bug: str | None = typer.Option(
            None,
            "--bug",
            help="Inject one mistake. A faulty controller: ignore-offline-dirs, keep-offline-replica-in-isr, elect-offline-leader, no-leader-epoch-bump, leader-outside-isr, stale-broker-epoch, skip-dir-assignment; with --metadata-version 4.1-IV1 (ELR on): elr-overlaps-isr, elect-outside-elr. Faulty brokers: broker-skip-assign, broker-early-unfence, broker-silent-dir-failure.",
        ),
        metadata_version: str = typer.Option(
            "3.9-IV0",
            "--metadata-version",
            help="kraft: the cluster's metadata.version, by Kafka's name or level (3.0-IV1 .. 4.2-IV1). From 4.1-IV0 the cluster starts as a new Kafka 4.1 cluster: eligible leader replicas (KIP-966) on, cluster min.insync.replicas 2 (see --min-insync-replicas); brokers that crash re-register unclean and leave every ELR.",
        ),
        min_insync_replicas: int = typer.Option(
            2, "--min-insync-replicas", min=1, help="kraft, from 4.1-IV0: the cluster-wide min.insync.replicas."
        ),
        fence_policy: bool = typer.Option(
            True,
            "--fence-policy/--no-fence-policy",
            help="Brokers follow KIP-858's policy (stay fenced until every replica's directory is recorded); --no-fence-policy: Kafka as shipped, serve first.",
        ),
        family: Family = typer.Option(
            Family.kraft,
            "--family",
            help="kraft: a JBOD Kafka cluster (default). s3stream: AutoMQ nodes writing streams to object storage; its bugs: commit-gap, delete-marked-at-once, end-offset-regress, leak-prepared-object, reference-destroyed-object, stale-epoch-commit. bookkeeper: bookies, ledgers, the auditor and replication workers, drains and decommissions; its bugs: auditor-ignores-unregistered, decommission-live-bookie, drain-before-replicated, ignore-recovery-delay, repair-into-same-ensemble, unweighted-placement, worker-never-releases.",
        ),
        bookies: int = typer.Option(
            8, "--bookies", min=4, help="bookkeeper: bookies at the start (a drained one is replaced)."
        ),
        careful_faults: bool = typer.Option(
            True,
            "--careful-faults/--correlated-faults",
            help="bookkeeper: fail a bookie only when every entry keeps a replica (--correlated-faults: data may become unreachable, which the audit reports as B8).",
        ),
        nodes: int = typer.Option(4, "--nodes", min=2, help="s3stream: AutoMQ nodes."),
        streams: int = typer.Option(40, "--streams", min=1, help="s3stream: streams alive at any time."),
        ttl_ms: int = typer.Option(
            60_000, "--ttl-ms", min=1, help="s3stream: how long a prepared object may wait for its commit."
        ),
        ops: str | None = typer.Option(
            None,
            "--ops",
            help="s3stream: only these operations (comma-separated): append, upload, compact, compact-stream-objects, trim, reassign, failover, delete, leak.",
        ),
    ) -> None:
        """Simulate a KRaft cluster with JBOD brokers living through log-dir failures, disk replacements, controlled shutdowns and crashes (or, with --family, AutoMQ's S3Stream metadata or a BookKeeper cluster).

        Every controller record is decided by kraftlake's deciders (Kafka 3.9 semantics; Kafka 4.1's with ELR from --metadata-version 4.1-IV0). The brokers are simulated too: each start loads its directories (LogDirsLoaded, the KIP-858 start-up rules), places its replicas (AssignReplicasToDirs, free-disk weighted), asks to be unfenced (UnfenceRequested) and reports failed directories (LogDirFailed, heartbeats' offline dirs). With --bug, one named mistake is injected, for checking that `kraftlake audit` catches it.

        --family bookkeeper: writers create and fill ledgers on free-disk weighted ensembles, bookies fail, come back, fill up and are drained; the auditor marks under-replicated ledgers after lostBookieRecoveryDelay and replication workers repair them.

        --family s3stream: AutoMQ nodes (automq.version V6) open streams, upload their WALs as stream-set objects, compact them into stream objects, trim, move streams with fast close (historical WAL duties), fail over, delete streams and leak uploads; the controller's records come from kraftlake's S3Stream deciders.
        """
        from kraftlake.records import encode_line
        from kraftlake.statemachine.kraft.workload import WorkloadConfig, generate

        if family is Family.bookkeeper:
            _simulate_bookkeeper(seed, records, out_file, bug, bookies, careful_faults)
            return
        if family is Family.s3stream:
            _simulate_s3stream(seed, records, out_file, bug, nodes, streams, ops, ttl_ms)
            return
        from kraftlake.statemachine.kraft.features import parse_metadata_version

        try:
            config = WorkloadConfig(
                metadata_version=parse_metadata_version(metadata_version),
                min_insync_replicas=min_insync_replicas,
                brokers=brokers,
                dirs_per_broker=dirs_per_broker,
                topics=topics,
                partitions=partitions,
                replication_factor=replication,
                seed=seed,
                bug=bug,
                fence_policy=fence_policy,
                faults=tuple(f.strip() for f in faults.split(",") if f.strip()),
            )
            if replication > brokers:
                raise ValueError(f"--replication {replication} needs at least as many brokers (--brokers {brokers})")
            n = 0
            with out_file.open("wb") as fh:
                for batch in generate(config, records=records):
                    fh.write(b"".join(encode_line(r) + b"\n" for r in batch))
                    n += len(batch)
        except ValueError as exc:
            abort(str(exc), EXIT_INPUT)
        err.print(f"wrote {n:,} records to {out_file}" + (f" (injected bug: {bug})" if bug else ""))
