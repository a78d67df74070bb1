"""``python -m ui``: the TUI (see ``ui.app``)."""

import argparse

from ui.app import run

parser = argparse.ArgumentParser(prog="python -m ui", description="The clawd TUI.")
parser.add_argument("--url", help="the daemon's address (default: find or start the local one)")
run(parser.parse_args().url)
