"""Signals: the rules (judge prompts, votes, majority, hints), the judge on an adapter-free
model, the background job that turns next states into signal sets and samples, and review.

In: turns with their next states, from ``clawd.store``. Out: signal sets and training samples,
written to the store. Must not import serving, training, ``clawd.cli``, ``adapters`` or ``ui``.
"""
