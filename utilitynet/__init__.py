"""utilitynet — the utility model contract: feature spec (numpy only), the torch MLP, ONNX export.

The runtime imports the numpy-only modules: ``features``, ``context``, ``columns``, ``dialog`` and
``session`` (and ``textstats`` through them). ``model`` and ``export`` need torch and belong to training.
The sentence encoder is not part of this contract: the runtime builds it (:mod:`runtime.encoders.build`).
"""
