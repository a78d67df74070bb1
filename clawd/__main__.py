"""``python -m clawd`` is the ``clawd`` command."""

from clawd.cli import main

main()
