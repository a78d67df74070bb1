"""Adapters: their lifecycle on disk: GGUF LoRA export, the versioned registry, the promotion
gate and its loop checks, the memory gaps of consolidation.

In: a trained LoRA from ``clawd.training``. Out: versions the daemon serves (``clawd.serving``
hot-loads them). Must not import ``clawd.serving``, ``clawd.training``, ``clawd.signals``,
``clawd.cli`` or ``clawd.ui``.
"""
