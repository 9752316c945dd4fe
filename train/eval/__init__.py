"""Evaluation of retention policies on the production path: held-out simulated families, real
conversations, the hindsight oracle, and the Markdown/plot report (``python -m train.eval``)."""
