"""utilitynet — the utility model contract: feature spec (numpy only), the torch MLP, ONNX export.

The runtime imports the numpy-only modules: ``features``, ``context``, ``columns``, ``dialog`` and
``session`` (and ``textstats`` through them). ``model`` and ``export`` need torch and belong to training;
``encoder_export`` is the torch-side encoder export, imported lazily by ``memir encoder export``.
"""
