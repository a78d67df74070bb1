"""``python -m clawd.ui``: the TUI (see ``clawd.ui.app``)."""

import argparse

from clawd.ui.app import run

parser = argparse.ArgumentParser(prog="python -m clawd.ui", description="The clawd TUI.")
parser.add_argument("--url", help="the daemon's address (default: find or start the local one)")
run(parser.parse_args().url)
