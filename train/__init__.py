"""train — the offline loop: simulate → collect trajectories → hindsight labels → fit → export → evaluate.

Nothing here is imported by ``runtime``; this package may use torch, lightning and datasets (lazily,
in the modules that need them). ``train.simulate`` is pure Python + numpy.
"""
