"""clawd: a personal assistant daemon that learns from the way its user replies.

One sub-package per step of the data flow, each handing off through the database or files:
``serving`` (the daemon: REST, chat, engine) -> ``store`` (SQLite: conversations, turns, next
states) -> ``signals`` (judge votes, hints, samples) -> ``training`` (the LoRA update) ->
``adapters`` (a top-level package: export, gate, hot-load). ``cli`` is the ``clawd`` command and
``scheduler`` the daemon's background jobs. What several steps share sits here: ``config``
(CLAWD_HOME, settings, the API token), ``models`` (catalog and downloads), ``chattemplate`` (the
GGUF's chat template and the hinted teacher context) and ``tinymodel`` (a tiny test model).
``tests/test_layout.py`` keeps the import rules true.
"""

__version__ = "0.1.0"
