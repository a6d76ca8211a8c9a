"""The adversarial suite (issue 33): bad input, damaged stores, fuzzed imports (seeded), HTTP
abuse and crashes, one class per file prefix. At the end of a run, the number of cases of each
class run, passed and failed is printed, so that a shrinking suite shows."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

CLASSES = {
    "test_input_": "input",
    "test_store_": "store corruption",
    "test_import_": "import fuzz (seeded)",
    "test_http_": "HTTP abuse",
    "test_crash_": "crash",
}
_counts: dict[str, Counter] = {name: Counter() for name in CLASSES.values()}


def _class_of(nodeid: str) -> str | None:
    path = nodeid.split("::", 1)[0]
    if "adversarial" not in Path(path).parts:
        return None
    name = Path(path).name
    return next((c for prefix, c in CLASSES.items() if name.startswith(prefix)), None)


def pytest_runtest_logreport(report):
    cls = _class_of(report.nodeid)
    if cls is None:
        return
    if report.when == "call" or (report.when == "setup" and not report.passed):
        _counts[cls]["run"] += 1
        _counts[cls]["passed" if report.passed else "skipped" if report.skipped else "failed"] += 1


def pytest_terminal_summary(terminalreporter):
    if not any(c["run"] for c in _counts.values()):
        return
    tr = terminalreporter
    tr.section("adversarial cases by class")
    for cls, c in _counts.items():
        tr.write_line(
            f"{cls:<22} {c['run']:>4} run, {c['passed']:>4} passed, {c['failed']:>3} failed, {c['skipped']} skipped"
        )
