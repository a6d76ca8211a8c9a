"""``kraftlake broker LOG --broker B``: one broker's side of KIP-858 at a point of the log: what
it serves, its directories, and what its replica management would do next."""

from __future__ import annotations

import typer

from kraftlake.cli.console import EXIT_INPUT, STORAGE_OPTION, abort, out, storage_options, write_bytes
from kraftlake.cli.view import Format


def register(app: typer.Typer) -> None:
    @app.command("broker")
    def broker(
        log: str = typer.Argument(..., help="The log."),
        storage_option: list[str] | None = STORAGE_OPTION,
        broker_id: int = typer.Option(..., "--broker", "-b", min=0, help="The broker."),
        offset: int | None = typer.Option(
            None, "--offset", "-o", help="After the record at this offset (default: the end)."
        ),
        fmt: Format = typer.Option(Format.table, "--format", "-f", help="table (default) or json."),
    ) -> None:
        """Show a broker's view (its replicas, their directories, online or not) and its pending actions.

        The broker's directories come from its observations (the last LogDirsLoaded, then the failures it saw); its disks are taken to agree with the metadata. The pending actions are those of the broker's replica management (KIP-858): say where UNASSIGNED replicas are created (free-disk weighted, seeded from the log), re-create replicas of directories no longer configured, report replicas found on an offline directory, leave those on offline directories alone; and whether KIP-858's policy keeps the broker fenced.
        """
        import msgspec

        from kraftlake.cli.progress import replay_progress
        from kraftlake.records import Log
        from kraftlake.records.observations import HeartbeatOfflineDirs, LogDirFailed, LogDirsLoaded
        from kraftlake.replay.state import state_at
        from kraftlake.statemachine import placement
        from kraftlake.statemachine.kraft import replica_manager as rm
        from kraftlake.statemachine.kraft.broker_view import broker_view

        opened = Log.open(log, storage_options=storage_options(storage_option))
        snapshot = opened.at(offset=offset)
        with replay_progress(snapshot.last_offset + 1) as progress:
            state = state_at(opened, offset=offset, progress=progress)
        if state.transaction is not None:
            state = state.published()
        if broker_id not in state.brokers and not state.partitions_of(broker_id):
            abort(f"broker {broker_id} is not registered and hosts no replica at offset {state.offset}", EXIT_INPUT)
        types = [t.__name__ for t in (LogDirsLoaded, LogDirFailed, HeartbeatOfflineDirs)]
        online, offline = rm.disks_from_observations(state, broker_id, snapshot.records(None, state.offset, types))
        bv = broker_view(state, broker_id)
        storage = rm.storage_from_metadata(state, broker_id, online, offline)
        plan = rm.plan(state, broker_id, storage, seed=placement.seed_for(state.offset + 1, f"dirs/{broker_id}"))
        if fmt is Format.json:
            doc = {"view": bv, "disks": {"online": online, "offline": offline}, "plan": plan}
            write_bytes(msgspec.json.encode(doc) + b"\n")
            return
        from rich.table import Table

        from kraftlake.cli.view import _broker_table, _dir

        _broker_table(bv)
        out.print(f"process directories: online {' '.join(online) or '-'}   offline {' '.join(offline) or '-'}")
        verdict = "[yellow]stay fenced[/] (KIP-858 policy)" if plan.stay_fenced else "may serve"
        out.print(f"mismatching replicas: {plan.mismatched}   {verdict}")
        if not plan.actions and not plan.waiting:
            out.print("[green]nothing to do[/]")
            return
        table = Table(title="pending actions", header_style="bold")
        for col in ("action", "topic", "p", "dir", "rule", "why"):
            table.add_column(col)
        for a in (*plan.actions, *plan.waiting):
            topic = state.topics[a.topic_id].name if a.topic_id in state.topics else a.topic_id
            table.add_row(a.kind, topic, str(a.partition_id), _dir(a.directory), a.rule, a.why)
        out.print(table)
