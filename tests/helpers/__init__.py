"""What the tests share, one definition each: builders and fixture paths that more than one test
module uses. Test modules import from here (``from helpers.kraft import uid``), never from each
other; ``tests/`` is on ``sys.path`` (pyproject.toml's ``[tool.pytest.ini_options] pythonpath``)."""
