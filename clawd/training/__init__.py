"""Training: the served GGUF as a torch model, batches, pure losses, the PPO update, one run
(held-out split, export, gate) and its report.

In: approved samples from ``clawd.store``. Out: a version folder published through
``adapters.registry`` as a candidate. Runs as its own process (``python -m clawd.training.run``);
must not import serving, ``clawd.scheduler``, ``clawd.cli`` or ``ui``.
"""
