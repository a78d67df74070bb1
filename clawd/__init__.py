"""clawd: a personal assistant daemon that learns from the way its user replies.

One sub-package per step of the data flow, each handing off through the database or files:
``serving`` (the daemon: REST, chat, engine, hot-load, its background jobs) -> ``store``
(SQLite: conversations, turns, next states) -> ``signals`` (judge votes, hints, samples) ->
``training`` (the LoRA update) -> ``adapters`` (the lifecycle on disk: export, versions, gate).
``cli`` is the ``clawd`` command and ``ui`` the TUI (over REST only). What several steps share
sits here: ``config`` (CLAWD_HOME, settings, the API token), ``models`` (catalog and
downloads), ``chattemplate`` (the GGUF's chat template and the hinted teacher context),
``trainlock`` (one training run at a time) and ``threads`` (how training threads wait).
``tests/test_layout.py`` keeps the import rules true.
"""

__version__ = "0.1.0"
