"""The Textual TUI of clawd: chat, learning review, adapters and memories, over the REST API."""
