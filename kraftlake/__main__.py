"""``python -m kraftlake``: the ``kraftlake`` command without its script."""

from kraftlake.cli.app import main

main()
