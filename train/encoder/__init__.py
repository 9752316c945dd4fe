"""The sentence encoder on the tooling side: build it and prove it matches sentence-transformers.

The runtime builds the ONNX encoder itself, without torch (:mod:`runtime.encoders.build`, behind
``memir encoder install``); that is the one export. This package holds what only a developer with
torch needs: the sentence-transformers reference (:mod:`.reference`) and ``python -m train.encoder``,
which runs that same build and then checks its vectors against the reference (``make encoder``).
"""
