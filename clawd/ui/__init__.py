"""The Textual TUI of clawd: chat, learning review, adapters and memories, over the REST API.

In: the daemon's REST API. Out: what the user sees and does. It talks to the daemon over HTTP
only: of clawd it imports ``clawd.config`` (for the token) and must not import
``clawd.serving``, ``clawd.store``, ``clawd.signals``, ``clawd.training``, ``clawd.adapters``,
``clawd.cli``, ``clawd.models``, ``clawd.chattemplate`` or ``clawd.trainlock``.
"""
