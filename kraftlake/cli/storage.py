"""``kraftlake format-dirs``: give Kafka log directories their KIP-858 identity (``meta.properties``
with ``directory.id`` and ``directory.ids``), the way ``kafka-storage format`` does."""

from __future__ import annotations

from pathlib import Path

import typer

from kraftlake.cli.console import EXIT_FAILED, EXIT_INPUT, abort, err, out


def register(app: typer.Typer) -> None:
    @app.command("format-dirs")
    def format_dirs(
        dirs: list[Path] = typer.Argument(
            ..., help="The broker's log directories (log.dirs), and its metadata.log.dir if apart."
        ),
        cluster_id: str = typer.Option(..., "--cluster-id", help="The cluster id every meta.properties must carry."),
        node_id: int = typer.Option(..., "--node-id", min=0, help="The node (broker) id."),
        dry_run: bool = typer.Option(False, "--dry-run", help="Say what would be written; write nothing."),
    ) -> None:
        """Write each directory's meta.properties: this cluster and node, a directory.id of its own (kept when it has one; a new random one, never a reserved id, otherwise) and directory.ids listing every directory given.

        Refuses, writing nothing, when a directory is unreadable (all must be available), belongs to another cluster or node, has a reserved id, or shares its id with another. Exit code 0 when done, 2 when refused.
        """
        import secrets

        from kraftlake.records import meta_properties as mp
        from kraftlake.records.types import uuid_from_bytes
        from kraftlake.statemachine.kraft import startup

        found: dict[str, object] = {}
        for d in dirs:
            key = str(d)
            try:
                found[key] = mp.read(d)
            except mp.MetaPropertiesError as exc:
                abort(str(exc), EXIT_INPUT)
            except OSError as exc:
                err.print(f"[yellow]{d}: {exc.strerror or exc}[/]")
                found[key] = startup.UNREADABLE
        plan = startup.plan_format(
            [str(d) for d in dirs],
            found,
            lambda: uuid_from_bytes(secrets.token_bytes(16)),
            cluster_id=cluster_id,
            node_id=node_id,
        )  # type: ignore[arg-type]  # ``found`` is typed object: what plan_format takes (a read or UNREADABLE)
        if isinstance(plan, startup.Refused):
            abort(plan.reason, EXIT_INPUT)
        from rich.table import Table

        table = Table(header_style="bold")
        for col in ("directory", "directory.id", "what"):
            table.add_column(col)
        for path, meta in plan.items():
            before = found[path]
            if before == meta:
                what = "unchanged"
            elif before is None:
                what = "formatted"
            elif getattr(before, "directory_id", None) is None:
                what = "new directory.id"
            else:
                what = "directory.ids updated"
            if what != "unchanged" and not dry_run:
                try:
                    mp.write(path, meta)
                except OSError as exc:
                    abort(f"{path}: {exc.strerror or exc} (directories before it are written)", EXIT_FAILED)
            table.add_row(
                path, meta.directory_id or "", what + (" (dry run)" if dry_run and what != "unchanged" else "")
            )
        out.print(table)
