"""mypy on kraftlake's folders under the names they are installed as (`make lint` runs it).

pyproject.toml maps top-level folders into one namespace (``kraftlake.records`` is ``records/``).
mypy cannot see that: the editable install is an import hook it does not run, and it names a file
by the folders above it, so ``records/base.py`` would be checked as ``records.base`` while the code
imports ``kraftlake.records.base``. This is mypy's command line (its options and ``files`` from
``[tool.mypy]``, arguments as for ``mypy``) with each file renamed by ``[tool.setuptools]
package-dir`` before the build. Errors name the files as they are in the work tree.

Only the listed files are renamed: a mapped folder they import must be listed too (``kraftlake/``
itself is found where it is; the layering keeps records/ and statemachine/ from importing replay/
or spark/). Plain ``mypy`` on this configuration would check ``records.base`` and find no
``kraftlake.records``.
"""

from __future__ import annotations

import os
import sys
import time
import tomllib
from pathlib import Path, PurePath

from mypy import util
from mypy.fscache import FileSystemCache
from mypy.main import process_options, run_build
from mypy.modulefinder import BuildSource

ROOT = Path(__file__).resolve().parent.parent


def installed_name(path: str, package_dir: dict[str, str]) -> str | None:
    """``records/kafka/dump.py`` -> ``kraftlake.records.kafka.dump``; None outside every mapped folder."""
    try:
        parts = Path(path).resolve().relative_to(ROOT).with_suffix("").parts
    except ValueError:
        return None
    best: tuple[str, tuple[str, ...]] | None = None
    for package, folder in package_dir.items():
        prefix = PurePath(folder).parts
        if parts[: len(prefix)] == prefix and (best is None or len(prefix) > len(best[1])):
            best = (package, prefix)
    if best is None:
        return None
    package, prefix = best
    rest = list(parts[len(prefix) :])
    if rest and rest[-1] == "__init__":
        rest.pop()
    return ".".join([package, *rest])


def main(argv: list[str]) -> int:
    t0 = time.time()
    os.chdir(ROOT)  # [tool.mypy]'s files are relative to the checkout
    package_dir = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["package-dir"]
    fscache = FileSystemCache()
    sources, options = process_options(argv, fscache=fscache)
    sources = [
        BuildSource(s.path, (s.path and installed_name(s.path, package_dir)) or s.module, s.text, str(ROOT))
        for s in sources
    ]
    _, messages, blockers = run_build(sources, options, fscache, t0, sys.stdout, sys.stderr)
    formatter = util.FancyFormatter(sys.stdout, sys.stderr, options.hide_error_codes)
    n_errors, n_notes, n_files = util.count_stats(messages)
    if n_errors:
        print(formatter.format_error(n_errors, n_files, len(sources), blockers=blockers, use_color=False))
        return 2 if blockers else 1
    print(formatter.format_success(len(sources), False))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
