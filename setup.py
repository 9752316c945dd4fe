"""Build hook: the shipped utility model travels inside the wheel.

``checkpoints/`` is where training writes models (``make train`` promotes the best one to
``checkpoints/utilitynet.onnx``). A wheel has no repository around it, so building it copies the
promoted model and its card into ``runtime/checkpoints/``, where :func:`runtime.scoring.default_model_path`
finds them — and the role-weight model and its card (``python -m train.fit.role_weights``), where
:func:`runtime.scoring.role_weights.default_role_model_path` finds them. Everything else is declared in ``pyproject.toml``.
"""

import shutil
from pathlib import Path

from setuptools import setup
from setuptools.command.build_py import build_py

SHIPPED = ("utilitynet.onnx", "model_card.json", "role_weights.onnx", "role_weights.json")


class BuildPyWithModel(build_py):
    def run(self) -> None:
        super().run()
        src = Path(__file__).parent / "checkpoints"
        missing = [f for f in SHIPPED if not (src / f).is_file()]
        if missing:
            raise SystemExit(f"cannot build: checkpoints/{missing[0]} is missing (run `make train` first)")
        dst = Path(self.build_lib) / "runtime" / "checkpoints"
        dst.mkdir(parents=True, exist_ok=True)
        for f in SHIPPED:
            shutil.copyfile(src / f, dst / f)


setup(cmdclass={"build_py": BuildPyWithModel})
