"""Signals: the rules (judge prompts, votes, majority, hints), the judges on an adapter-free
model (the probe over its hidden states, written votes, or an OpenAI-compatible endpoint), the
background job that turns next states into signal sets and samples, and review.

In: turns with their next states and feedback, from ``clawd.store``; the labelled exchanges in
``data/`` that the probe is fitted on. Out: signal sets and training samples, written to the
store. Must not import serving, training, ``clawd.cli``, ``clawd.adapters`` or ``clawd.ui``.
"""
