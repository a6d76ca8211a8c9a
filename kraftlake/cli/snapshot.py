"""``kraftlake snapshot LOG``: store controller-view snapshots so that views at any offset are fast."""

from __future__ import annotations

import typer

from kraftlake.cli.console import STORAGE_OPTION, err, out, storage_options, write_bytes


def register(app: typer.Typer) -> None:
    @app.command("snapshot")
    def snapshot(
        log: str = typer.Argument(..., help="The log."),
        storage_option: list[str] | None = STORAGE_OPTION,
        every: int = typer.Option(100_000, "--every", "-n", min=1, help="A snapshot every N records."),
        list_only: bool = typer.Option(False, "--list", help="List stored snapshots instead (JSON Lines)."),
        drop: bool = typer.Option(False, "--drop", help="Delete every stored snapshot (they can be rebuilt)."),
    ) -> None:
        """Replay the log once and store the controller view every N records.

        Snapshots live in LOG/_kraftlake_snapshots (a Delta table of their own that the log's vacuum leaves alone); `kraftlake view` then replays only from the nearest one. Running it again continues from the newest snapshot.
        """
        import json

        from kraftlake.cli.progress import replay_progress
        from kraftlake.records import Log
        from kraftlake.replay.snapshots import SnapshotStore
        from kraftlake.replay.state import take_snapshots

        opened = Log.open(log, storage_options=storage_options(storage_option))
        store = SnapshotStore(opened.path, opened.storage_options)
        if drop:
            store.delete()
            err.print(f"dropped the snapshots of {log}")
            return
        if list_only:
            write_bytes(b"".join(json.dumps(s.to_dict()).encode() + b"\n" for s in store.list()))
            return
        existing = store.list()
        start = existing[-1].offset + 1 if existing else 0
        with replay_progress(opened.last_offset + 1 - start, "snapshotting") as progress:
            written = take_snapshots(opened, every=every, progress=progress)
        for s in written:
            out.print(
                f"snapshot at offset {s.offset}: {s.partitions} partitions, {s.brokers} brokers, {s.bytes} bytes, state {s.state_hash[:16]}"
            )
        err.print(f"{len(written)} snapshot(s) written, {len(existing) + len(written)} stored")
