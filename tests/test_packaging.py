"""Every package folder is mapped into the kraftlake namespace by pyproject.toml."""

from __future__ import annotations

import tomllib
from pathlib import Path

ROOT = Path(__file__).parent.parent


def test_every_package_folder_is_listed():
    conf = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]
    mapping = conf["package-dir"]
    listed = set(conf["packages"])
    for package, folder in mapping.items():
        for init in (ROOT / folder).rglob("__init__.py"):
            rel = init.parent.relative_to(ROOT / folder)
            name = ".".join([package, *rel.parts])
            assert name in listed, f"{name} ({init.parent}) is missing from [tool.setuptools] packages"


def test_namespace_imports():
    import kraftlake.records
    import kraftlake.replay
    import kraftlake.spark
    import kraftlake.statemachine

    assert Path(kraftlake.records.__file__).parent == ROOT / "records"
