"""The few spellings in which DuckDB's SQL and Spark SQL differ, for the audit plan's SQL
(``replay.plan.sql``) and the invariants' own (``statemachine.kraft.invariants_sql``): pure string
spelling, the standard library only, so that a family's rules spell their SQL beside their
per-record checks without importing the engines above them.

The plan is written once, in the SQL both engines share (windows with a WINDOW clause, joins,
CASE, aggregates, ``IS NOT DISTINCT FROM``), and calls these for what each spells its own way:
identifiers that are keywords, arrays (size, membership, filters with lambdas, 1-based access
that is null out of range), generators (explode, posexplode), forward fills (``last`` ignoring
nulls) and ordered lists in aggregates.

Why not one dialect transpiled by sqlglot (30.30, measured on the plan's expressions): Spark's
``last(x, true) OVER (...)`` came out as DuckDB's ``LAST(x) OVER (...)`` with the ignore-nulls
dropped (a warning, then a wrong forward fill), and ``array_except`` as a nest of a
``LIST_DISTINCT`` and two ``LIST_FILTER``s per use. A table of a dozen spellings is smaller than
the checks it would take to trust a transpiler's output, and each engine's SQL can be read as is.

Directory ids (22-character strings) are a DuckDB ENUM (``DIR_TYPE``) in the plan: a dictionary
of the directories the plan meets, built first (``replay.plan.run.build_timeline``), so that
windows, joins and arrays carry small integers (the window of the partition timeline costs a third less,
bench/RESULTS.md), compared, collected and returned as the same strings. Spark keeps strings:
there the spellings below (``dir``, ``as_dirs``, ``dir_type``) are the plain ones.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

DIR_TYPE = "kraftlake_dir"
"""DuckDB's ENUM of the log's directory ids (``DuckEngine.directories``)."""
_DUCK_TYPES = {"STRING": "VARCHAR", "DIR": DIR_TYPE}


@dataclass(frozen=True)
class Dialect:
    name: str

    @property
    def duck(self) -> bool:
        return self.name == "duckdb"

    def q(self, name: str) -> str:
        """An identifier that may be a keyword (``offset``, ``partition``, ``type``, ``key``)."""
        return f'"{name}"' if self.duck else f"`{name}`"

    def size(self, a: str) -> str:
        return f"len({a})" if self.duck else f"size({a})"

    def contains(self, a: str, x: str) -> str:
        return f"list_contains({a}, {x})" if self.duck else f"array_contains({a}, {x})"

    def filter(self, a: str, cond: Callable[[str], str]) -> str:
        """The elements ``v`` of ``a`` for which ``cond(v)`` holds, in order."""
        return f"list_filter({a}, lambda v: {cond('v')})" if self.duck else f"filter({a}, v -> {cond('v')})"

    def filter_at(self, a: str, cond: Callable[[str, str], str]) -> str:
        """``filter`` with the element's 0-based index: ``cond(v, i)``."""
        if self.duck:
            return f"list_filter({a}, lambda v, i: {cond('v', '(i - 1)')})"
        return f"filter({a}, (v, i) -> {cond('v', 'i')})"

    def transform(self, a: str, expr: Callable[[str], str]) -> str:
        return f"list_transform({a}, lambda v: {expr('v')})" if self.duck else f"transform({a}, v -> {expr('v')})"

    def transform_at(self, a: str, expr: Callable[[str, str], str]) -> str:
        """``transform`` with the element's 0-based index: ``expr(v, i)``."""
        if self.duck:
            return f"list_transform({a}, lambda v, i: {expr('v', '(i - 1)')})"
        return f"transform({a}, (v, i) -> {expr('v', 'i')})"

    def struct(self, *fields: tuple[str, str]) -> str:
        """A struct of (name, value) ``fields``, in that order."""
        if self.duck:
            return "{" + ", ".join(f"'{name}': {value}" for name, value in fields) + "}"
        return "named_struct(" + ", ".join(f"'{name}', {value}" for name, value in fields) + ")"

    def to_json(self, x: str) -> str:
        """``x`` as compact JSON text: a struct's fields in their order, null ones written null."""
        return f"to_json({x})" if self.duck else f"to_json({x}, map('ignoreNullFields', 'false'))"

    def outside(self, a: str, b: str) -> str:
        """Whether ``a`` has an element that is not in ``b`` (not true where either is null):
        a set function of each engine's, not a filter with a lambda (several times faster on
        DuckDB, where every partition state asks it)."""
        return f"NOT list_has_all({b}, {a})" if self.duck else f"size(array_except({a}, {b})) > 0"

    def at(self, a: str, i: str) -> str:
        """``a``'s element at 1-based ``i``; null out of range."""
        return f"{a}[{i}]" if self.duck else f"try_element_at({a}, CAST({i} AS INT))"

    def position(self, a: str, x: str) -> str:
        """1-based position of ``x`` in ``a`` (only where ``a`` contains it)."""
        return f"list_position({a}, {x})" if self.duck else f"CAST(array_position({a}, {x}) AS INT)"

    def empty(self, element: str) -> str:
        """An empty array of ``element`` (``INT``, ``STRING``, ``DIR``: directory ids)."""
        if self.duck:
            return f"[]::{_DUCK_TYPES.get(element, element)}[]"
        return f"CAST(array() AS ARRAY<{'STRING' if element == 'DIR' else element}>)"

    @property
    def dir_type(self) -> str:
        """The type of a directory id."""
        return DIR_TYPE if self.duck else "STRING"

    def dir(self, value: str) -> str:
        """A directory id as a literal (of ``dir_type``: DuckDB compares an ENUM list with a
        string by casting the whole list to strings)."""
        return f"'{value}'::{DIR_TYPE}" if self.duck else f"'{value}'"

    def as_dir(self, x: str) -> str:
        """A string column read from the log as a directory id."""
        return f"CAST({x} AS {DIR_TYPE})" if self.duck else x

    def as_dirs(self, a: str) -> str:
        """An array of strings read from the log as directory ids."""
        return f"CAST({a} AS {DIR_TYPE}[])" if self.duck else a

    def repeat(self, x: str, n: str) -> str:
        return f"list_transform(range({n}), lambda _: {x})" if self.duck else f"array_repeat({x}, {n})"

    def union(self, a: str, b: str) -> str:
        """The distinct elements of ``a`` and ``b`` (order not kept)."""
        return f"list_distinct(list_concat({a}, {b}))" if self.duck else f"array_union({a}, {b})"

    def cat(self, a: str, b: str) -> str:
        """``a`` then ``b``."""
        return f"list_concat({a}, {b})" if self.duck else f"concat({a}, {b})"

    def idiv(self, a: str, b: int | str) -> str:
        """``a // b`` for ``a >= 0``, as a BIGINT."""
        return f"(({a}) // {b})" if self.duck else f"(({a}) div {b})"

    def distinct(self, a: str) -> str:
        return f"list_distinct({a})" if self.duck else f"array_distinct({a})"

    def array(self, *xs: str) -> str:
        return f"[{', '.join(xs)}]" if self.duck else f"array({', '.join(xs)})"

    def seq(self, lo: str, hi: str) -> str:
        """The integers ``lo..hi`` (inclusive) as an array."""
        return f"generate_series({lo}, {hi})" if self.duck else f"sequence({lo}, {hi})"

    def explode(self, a: str, alias: str) -> str:
        """A select-list item: a row per element of ``a``."""
        return f"unnest({a}) AS {alias}" if self.duck else f"explode({a}) AS {alias}"

    def posexplode(self, a: str, pos: str, alias: str) -> str:
        """A select-list item: a row per element of ``a`` with its 0-based position."""
        if self.duck:
            return f"generate_subscripts({a}, 1) - 1 AS {pos}, unnest({a}) AS {alias}"
        return f"posexplode({a}) AS ({pos}, {alias})"

    def last(self, x: str) -> str:
        """The last non-null ``x`` of a window frame (``OVER`` follows)."""
        return f"last_value({x} IGNORE NULLS)" if self.duck else f"last({x}, true)"

    def ordered_list(self, value: str, by: str, where: str) -> str:
        """An aggregate: ``value`` of the rows where ``where`` holds, ordered by ``by`` (null
        when there is none)."""
        if self.duck:
            return f"list({value} ORDER BY {by}) FILTER (WHERE {where})"
        collected = f"array_sort(collect_list(CASE WHEN {where} THEN struct({by} AS k, {value} AS x) END))"
        return f"CASE WHEN count(CASE WHEN {where} THEN 1 END) > 0 THEN transform({collected}, s -> s.x) END"

    def max_by(self, value: str, by: str) -> str:
        """``value`` of the row with the greatest ``by`` (``value`` never null here)."""
        return f"arg_max({value}, {by})" if self.duck else f"max_by({value}, {by})"

    def min_by(self, value: str, by: str) -> str:
        """``value`` of the row with the least ``by`` (``value`` never null here: DuckDB's
        ``arg_min`` skips a null one, Spark's ``min_by`` does not)."""
        return f"arg_min({value}, {by})" if self.duck else f"min_by({value}, {by})"


DUCKDB = Dialect("duckdb")
SPARK = Dialect("spark")
