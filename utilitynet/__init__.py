"""utilitynet — the utility model contract: feature spec (numpy only), the torch MLP, ONNX export.

Only ``utilitynet.features`` and ``utilitynet.context`` are imported by the runtime; they need numpy only.
"""
