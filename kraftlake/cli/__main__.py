"""``python -m kraftlake.cli``: the ``kraftlake`` command without its script."""

from kraftlake.cli.app import main

main()
