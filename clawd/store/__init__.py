"""The store: the SQLite database (WAL), its named migrations, and the record of conversations,
turns, next states and feedback.

In: what serving records and what signals and training write. Out: rows for every other step.
Must not import serving, signals, training, ``clawd.cli``, ``clawd.adapters`` or ``clawd.ui``:
it knows nothing of HTTP, models or the UI.
"""
