"""``kraftlake simulate``: a seeded JBOD cluster driven by the controller's and the brokers'
deciders, with faults and optionally a faulty controller or broker, written as JSON Lines."""

from __future__ import annotations

from pathlib import Path

import typer

from kraftlake.cli.console import EXIT_INPUT, abort, err


def register(app: typer.Typer) -> None:
    @app.command("simulate")
    def simulate(
        seed: int = typer.Option(..., "--seed", help="Same seed and options, byte-identical output."),
        records: int = typer.Option(10_000, "--records", "-n", min=1, help="Stop after at least this many records."),
        out_file: Path = typer.Option(..., "--out", "-o", help="JSON Lines file to write (appendable with `kraftlake append`)."),
        brokers: int = typer.Option(6, "--brokers", min=1),
        dirs_per_broker: int = typer.Option(3, "--dirs-per-broker", min=1),
        partitions: int = typer.Option(60, "--partitions", min=1),
        topics: int = typer.Option(5, "--topics", min=1),
        replication: int = typer.Option(3, "--replication", min=1),
        faults: str = typer.Option("dir-failure,controlled-shutdown,broker-crash", "--faults", help="Comma-separated: dir-failure, controlled-shutdown, broker-crash, reassign."),
        bug: str | None = typer.Option(None, "--bug", help="Inject one mistake. A faulty controller: ignore-offline-dirs, keep-offline-replica-in-isr, elect-offline-leader, no-leader-epoch-bump, leader-outside-isr, stale-broker-epoch, skip-dir-assignment. Faulty brokers: broker-skip-assign, broker-early-unfence, broker-silent-dir-failure."),
        fence_policy: bool = typer.Option(True, "--fence-policy/--no-fence-policy", help="Brokers follow KIP-858's policy (stay fenced until every replica's directory is recorded); --no-fence-policy: Kafka as shipped, serve first."),
    ) -> None:
        """Simulate a KRaft cluster with JBOD brokers living through log-dir failures, disk replacements, controlled shutdowns and crashes.

        Every controller record is decided by kraftlake's deciders (Kafka 3.9 semantics). The brokers are simulated too: each start loads its directories (LogDirsLoaded, the KIP-858 start-up rules), places its replicas (AssignReplicasToDirs, free-disk weighted), asks to be unfenced (UnfenceRequested) and reports failed directories (LogDirFailed, heartbeats' offline dirs). With --bug, one named mistake is injected, for checking that `kraftlake audit` catches it.
        """
        from kraftlake.records import encode_line
        from kraftlake.statemachine.kraft.workload import WorkloadConfig, generate

        try:
            config = WorkloadConfig(
                brokers=brokers, dirs_per_broker=dirs_per_broker, topics=topics, partitions=partitions,
                replication_factor=replication, seed=seed, bug=bug, fence_policy=fence_policy,
                faults=tuple(f.strip() for f in faults.split(",") if f.strip()),
            )  # fmt: skip
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
