"""The layers call down, never up (issue 56): records <- statemachine <- replay <- spark <- the
facade (``kraftlake/``: the CLI, the service, ``kraftlake.audit``). Read from the source, every
import (also those inside functions), so a lazy import cannot hide a call back up."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).parent.parent

MAY_IMPORT = {
    "records": {"records"},
    "statemachine": {"records", "statemachine"},
    "replay": {"records", "statemachine", "replay"},
    "spark": {"records", "statemachine", "replay", "spark"},
}
"""Per code folder (``kraftlake.<folder>``), the kraftlake packages its modules may import."""

SHARED = {"kraftlake.logging"}
"""Imported by every layer: structlog's set-up, importing nothing of kraftlake's."""


def _imports(path: Path) -> list[tuple[int, str]]:
    found = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            found += [(node.lineno, a.name) for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            found.append((node.lineno, node.module))
    return [(line, name) for line, name in found if name == "kraftlake" or name.startswith("kraftlake.")]


@pytest.mark.parametrize("folder", sorted(MAY_IMPORT))
def test_each_layer_imports_only_the_layers_below_it(folder):
    up = []
    for path in sorted((ROOT / folder).rglob("*.py")):
        for line, name in _imports(path):
            if name in SHARED:
                continue
            package = name.split(".")[1] if "." in name else ""
            if package not in MAY_IMPORT[folder]:
                up.append(f"{path.relative_to(ROOT)}:{line} imports {name}")
    assert up == []


def test_the_shared_module_imports_nothing_of_kraftlakes():
    assert _imports(ROOT / "kraftlake" / "logging.py") == []
