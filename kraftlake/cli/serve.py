"""``kraftlake serve LOG``: the HTTP service (appends with group commit, reads, views, audits)."""

from __future__ import annotations

import gc
from pathlib import Path

import typer

from kraftlake.cli.audit import GRACE_MS, GRACE_RECORDS
from kraftlake.cli.console import EXIT_INPUT, STORAGE_OPTION, abort, err, storage_options
from kraftlake.service.limits import Limits


def register(app: typer.Typer) -> None:
    @app.command("serve")
    def serve(
        log: str = typer.Argument(..., help="The log to serve (kraftlake init creates one)."),
        storage_option: list[str] | None = STORAGE_OPTION,
        host: str = typer.Option("127.0.0.1", "--host", help="Interface to bind; loopback unless told otherwise."),
        port: int = typer.Option(8080, "--port", min=0, max=65535),
        max_batch_records: int = typer.Option(
            50_000, "--max-batch-records", min=1, help="Records per Delta commit at most."
        ),
        max_wait_ms: float = typer.Option(
            5.0,
            "--max-wait-ms",
            min=0,
            help="How long a commit waits for more requests while it is below --min-batch-records.",
        ),
        min_batch_records: int = typer.Option(1, "--min-batch-records", min=1),
        max_queued_records: int = typer.Option(
            500_000, "--max-queued-records", min=1, help="Records waiting beyond this get 429 with Retry-After."
        ),
        compact_after: int = typer.Option(
            2_000,
            "--compact-after",
            min=0,
            help="Compact the table in the background once it holds more than this many files (every commit adds one; readers and Spark pay for each). 0: never (kraftlake maintain compacts too, and vacuums).",
        ),
        max_body_bytes: int = typer.Option(
            Limits.max_body_bytes, "--max-body-bytes", min=1, help="An append's body at most (413 past it)."
        ),
        max_record_bytes: int = typer.Option(
            Limits.max_record_bytes,
            "--max-record-bytes",
            min=1,
            help="One record in an append, as sent, at most (413 naming its index).",
        ),
        body_timeout: float = typer.Option(
            Limits.body_timeout_s,
            "--body-timeout",
            min=0.001,
            help="Seconds a request body has to arrive, from the request's start (408 past it).",
        ),
        max_read_records: int = typer.Option(
            Limits.max_read_records,
            "--max-read-records",
            min=1,
            help="Offsets one GET /v1/records covers at most (page with from/to); sent as they are read.",
        ),
        read_workers: int = typer.Option(
            Limits.read_workers, "--read-workers", min=1, help="Threads for reads, views and audits."
        ),
        reads_per_client: int = typer.Option(
            Limits.reads_per_client,
            "--reads-per-client",
            min=1,
            help="Reads, views and audits one client (token, else address) may have running or waiting (429 past it).",
        ),
        max_reads: int = typer.Option(
            Limits.max_reads,
            "--max-reads",
            min=1,
            help="Reads, views and audits running or waiting in all (429 past it).",
        ),
        max_waiting: int = typer.Option(
            Limits.max_waiting,
            "--max-waiting",
            min=1,
            help="Clients waiting for records (long polls with wait_ms, SSE streams) in all (429 past it).",
        ),
        max_poll_wait_ms: int = typer.Option(
            Limits.max_poll_wait_ms, "--max-poll-wait-ms", min=1, help="A long poll's wait_ms, at most."
        ),
        audit: bool = typer.Option(
            False,
            "--audit",
            help="Run the following audit (as kraftlake audit --follow) over the log as it lands: open violations at GET /v1/audits/live and as kraftlake_audit_* gauges on /metrics.",
        ),
        grace_records: int | None = GRACE_RECORDS,
        grace_ms: int = GRACE_MS,
        tokens: Path | None = typer.Option(
            None,
            "--tokens",
            help='JSON file {"tokens": [{"token" (or "sha256"), "producer", "roles": ["append", "read", "admin"]}]}: every request then needs "Authorization: Bearer TOKEN" with the right role, and a token appends only as its own producer.',
        ),
    ) -> None:
        """Serve the log over HTTP: POST /v1/records (JSON or msgpack; exactly once per producer and seq; acknowledged once committed, requests waiting together share one Delta commit), GET /v1/records, GET /v1/views/controller, GET /v1/views/brokers/{id}, POST /v1/audits, GET /healthz, GET /readyz, GET /metrics, and the OpenAPI schema at /schema (docs at /schema/swagger).

        Memory per request is bounded by --max-body-bytes, --max-record-bytes and --max-read-records (large reads are streamed); /healthz and /readyz never wait on reads or commits, and the commit process is restarted if it dies.

        Without --tokens anyone who reaches the port may append: keep the default loopback --host, or give --tokens. Access logs (method, path, status, ms; never tokens) go to stderr through structlog (--log-json for JSON lines).
        """
        import uvicorn

        from kraftlake.records import Log, LogNotFoundError
        from kraftlake.service.app import create_app
        from kraftlake.service.auth import TokenFileError, load_tokens
        from kraftlake.service.committer import CommitConfig

        options = storage_options(storage_option)
        try:
            Log.open(log, storage_options=options)
            known = load_tokens(tokens) if tokens is not None else None
        except (LogNotFoundError, TokenFileError) as exc:
            abort(str(exc), EXIT_INPUT)
        if known is None and host not in ("127.0.0.1", "localhost", "::1"):
            err.print(f"[yellow]warning: serving {host} without --tokens: anyone who reaches it may append[/]")
        config = CommitConfig(
            max_records=max_batch_records,
            max_wait_ms=max_wait_ms,
            min_records=min_batch_records,
            max_queued_records=max_queued_records,
            compact_after_files=compact_after or None,
        )
        limits = Limits(
            max_body_bytes=max_body_bytes,
            max_record_bytes=max_record_bytes,
            body_timeout_s=body_timeout,
            max_read_records=max_read_records,
            read_workers=read_workers,
            reads_per_client=reads_per_client,
            max_reads=max_reads,
            max_waiting=max_waiting,
            max_poll_wait_ms=max_poll_wait_ms,
        )
        audit_config = None
        if audit:
            from kraftlake.replay.books import AuditConfig

            audit_config = AuditConfig(grace_records=grace_records, grace_ms=grace_ms)
        service = create_app(log, config, known, limits=limits, storage_options=options, audit=audit_config)
        # What start-up made (Litestar's routes and schemas, pyarrow, the record catalogue) lives
        # as long as the process: kept out of the collector's sight, a full collection takes a
        # few milliseconds instead of 20-50, during which every request on the loop waits.
        gc.collect()
        gc.freeze()
        err.print(f"serving {log} on http://{host}:{port} (OpenAPI at /schema)")
        uvicorn.run(service, host=host, port=port, access_log=False, log_level="warning")
