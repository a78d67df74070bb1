"""The Textual TUI of clawd: chat, learning review and adapters, over the daemon's REST API."""
