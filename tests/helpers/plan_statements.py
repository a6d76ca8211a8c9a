"""Which of the audit plan's statements a run executes: every call of an engine's statement
methods (``rows``, ``keep``, ``view``…) in the plan's modules, found in their source, and a
proxy engine that records the call sites it runs. The Spark tier runs a few logs on Spark; these
prove on DuckDB, where it is cheap, that those few run every statement the plan has."""

from __future__ import annotations

import ast
import sys
from pathlib import Path

import kraftlake.replay.plan as plan_package
from kraftlake.statemachine.kraft.invariants_sql import RELATIONAL

METHODS = frozenset(
    {"rows", "iter_rows", "arrow", "arrow_batches", "keep", "view", "table", "arrow_table", "directories"}
)
"""The engine methods that run SQL or register a relation the SQL reads."""

ENGINES = ("duck.py",)
"""The embedded engine itself: what it runs is the statements' implementation, not the plan's
(Spark's, ``spark.engine``, lives with what only Spark needs)."""


def plan_files() -> list[Path]:
    root = Path(plan_package.__file__).parent
    return sorted(p for p in root.glob("*.py") if p.name not in ENGINES)


def _calls(path: Path):
    """The engine statement calls in ``path``'s source."""
    for node in ast.walk(ast.parse(path.read_text())):
        if (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and node.func.attr in METHODS
            and isinstance(node.func.value, ast.Name)
            and node.func.value.id == "engine"
        ):
            yield node


REGISTRY = "invariants_sql.RELATIONAL"
"""The site of each relational invariant's statements: the plan runs them all from the same few
calls (``run._Stage``), so each entry of the registry that words its rows is a site of its own
(``(REGISTRY, invariant)``), run where a call runs while the stage holds that entry (``rule``)."""


def statement_sites() -> dict[tuple[str, int | str], str]:
    """Each call of an engine's statement method in the plan's source: (file name, first line)
    -> the call's text (its first line), for messages; and each relational invariant's entry
    (``REGISTRY``)."""
    return {
        **{
            (path.name, node.lineno): ast.unparse(node).splitlines()[0][:100]
            for path in plan_files()
            for node in _calls(path)
        },
        **{(REGISTRY, inv): f"{inv}'s statements" for inv, r in RELATIONAL.items() if r.found is not None},
    }


def _ranges() -> dict[str, list[tuple[int, int]]]:
    return {path.name: [(n.lineno, n.end_lineno or n.lineno) for n in _calls(path)] for path in plan_files()}


class Recording:
    """An engine that records the plan's call sites it ran (``ran``: (file name, first line of
    the call)) and otherwise is the engine it wraps."""

    def __init__(self, engine) -> None:
        self._engine = engine
        self._ranges = _ranges()
        self.ran: set[tuple[str, int | str]] = set()

    def __getattr__(self, name: str):
        target = getattr(self._engine, name)
        if name not in METHODS:
            return target

        def recorded(*args, **kwargs):
            frame = sys._getframe(1)
            file, line = Path(frame.f_code.co_filename).name, frame.f_lineno
            # The innermost call whose lines hold the frame's line (a call spans several lines).
            spans = [s for s in self._ranges.get(file, ()) if s[0] <= line <= s[1]]
            if spans:
                self.ran.add((file, max(spans)[0]))
            rule = frame.f_locals.get("rule")
            if rule is not None and getattr(rule, "invariant", None) in RELATIONAL:
                self.ran.add((REGISTRY, rule.invariant))
            return target(*args, **kwargs)

        return recorded
