"""clawd: a personal assistant daemon that learns from the way its user replies.

Modules, one per step of the data flow: ``config`` (settings and CLAWD_HOME), ``models``
(catalog and downloads), ``store`` and ``migrations`` (SQLite), ``tinymodel`` (fixture models),
``cli`` (the ``clawd`` command).
"""

__version__ = "0.1.0"
