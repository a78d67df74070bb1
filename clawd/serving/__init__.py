"""Serving: the daemon's FastAPI app, the OpenAI-compatible chat route, request types and
errors, the llama.cpp engine and its text streaming.

In: HTTP requests. Out: answers, and every turn recorded through ``clawd.store``; the jobs run
by ``clawd.scheduler``. Must not import ``clawd.training``, ``clawd.cli`` or ``ui``.
"""
