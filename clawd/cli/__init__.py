"""The ``clawd`` command line (typer): chat, serve, models, config, signals, train, adapters.

In: the user's command. Out: calls to the daemon over REST where one runs, else to the store and
the registry directly. It is the outermost layer: the other packages must not import it.
"""
