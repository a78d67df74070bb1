"""The Textual app (``clawd chat``). It talks to the daemon over the REST API only."""
