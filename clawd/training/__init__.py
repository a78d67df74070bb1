"""Training: the served GGUF as a torch model, batches, pure losses, the PPO update, the
update as a pure function (here or on a Ray cluster), one run (export, gate) and its report.

In: approved samples from ``clawd.store``. Out: a version folder published through
``clawd.adapters.registry`` as a candidate. Runs as its own process
(``python -m clawd.training.train``); must not import ``clawd.serving``, ``clawd.cli`` or
``clawd.ui``.
"""
