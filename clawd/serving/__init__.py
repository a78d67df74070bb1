"""Serving: the daemon's FastAPI app, the OpenAI-compatible chat route, request types and
errors, the llama.cpp engine and its text streaming, the adapter routes with hot-load and
promotion, and the background jobs (``scheduler``: signals, nightly training as a process).

In: HTTP requests; candidate adapters from ``clawd.adapters``. Out: answers, and every turn
recorded through ``clawd.store``. Must not import ``clawd.training``, ``clawd.cli`` or
``clawd.ui``.
"""
