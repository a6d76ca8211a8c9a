"""``kraftlake append LOG [FILE|-]``: append a JSON Lines file as one atomic batch."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import typer

from kraftlake.cli.console import EXIT_INPUT, STORAGE_OPTION, abort, storage_options, write_bytes


def _seq(text: str) -> int:
    """``--seq`` as the service reads a seq (digits, no sign, no spaces, no ``_``), where
    ``int()`` would take ``2_2`` or `` 21``."""
    if not text.isascii() or not text.isdigit() or (len(text) > 1 and text[0] == "0"):
        raise typer.BadParameter(f"{text!r} is not an integer of 0 or more (digits only)")
    return int(text)


def register(app: typer.Typer) -> None:
    @app.command("append")
    def append(
        log: str = typer.Argument(..., help="The log (created by `kraftlake init`)."),
        storage_option: list[str] | None = STORAGE_OPTION,
        file: str = typer.Argument("-", help="JSON Lines file of records, or - for stdin."),
        producer: str | None = typer.Option(
            None, "--producer", help="Producer id, for exactly-once batches (needs --seq)."
        ),
        seq: int | None = typer.Option(
            None,
            "--seq",
            parser=_seq,
            metavar="INTEGER",
            help="Batch sequence of the producer (0 or more); a repeated one lands once.",
        ),
    ) -> None:
        """Append records, one JSON object per line, as one batch.

        Each line is {"type": "PartitionChange", "version": 2, ...fields}. The whole file lands in one commit with gapless offsets, or nothing lands; an invalid line aborts with exit code 2 and a message naming line, record type and field. Lines taken from `kraftlake log` keep their old offset as source_offset.

        Prints {"first_offset", "last_offset", "version", "duplicate"} as JSON.
        """
        from kraftlake.records import Log, ProducerSeq, RecordError
        from kraftlake.records.columnar import from_lines

        try:
            ProducerSeq.of(producer, seq)
        except RecordError as exc:
            both = producer is None or seq is None
            abort("--producer and --seq go together" if both else f"--{exc.field}: {exc.message}", EXIT_INPUT)
        if file == "-":
            lines = sys.stdin.buffer.read().splitlines()
        else:
            try:
                lines = Path(file).read_bytes().splitlines()
            except OSError as exc:
                abort(f"cannot read {file}: {exc.strerror}", EXIT_INPUT)
        records = from_lines(lines)
        if not records:
            abort(f"{file}: no records to append", EXIT_INPUT)
        result = Log.open(log, storage_options=storage_options(storage_option)).append(
            records, producer=producer, seq=seq, validated=True
        )
        write_bytes((json.dumps(result.to_dict()) + "\n").encode())
