"""``python -m clawd`` is the ``clawd`` command."""

from clawd.cli.main import main

main()
