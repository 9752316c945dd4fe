"""``TrainConfig``: the one config of ``make train`` (presets in ``train/configs/*.yaml``).

Each stage keeps its own frozen config (``SimConfig``, ``AgentConfig``, ``LabelConfig``,
``FitConfig``); this file only composes them and resolves a preset. A bad field raises
``runtime.errors.ValidationError`` naming it (``fit.lr: must be > 0``).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import yaml

from runtime.errors import ValidationError

from .agent import AgentConfig
from .fit import FitConfig
from .label import LabelConfig
from .simulate import SimConfig

__all__ = ["TrainConfig", "load_preset", "PRESET_DIR"]

PRESET_DIR = Path(__file__).parent / "configs"


@dataclass(frozen=True)
class TrainConfig:
    """The whole offline loop.

    Attributes:
        rounds: self-play rounds (round 0 collects with keep-most-recent, round r with round r−1's model).
        sim: training episodes (train templates/entities, held-out families excluded).
        eval_sim: evaluation episodes (eval templates/entities, held-out families only).
        agent: how the simulated agent uses memory while collecting.
        label: hindsight labelling.
        fit: Lightning fit.
        eval_capacities: capacities (fraction of a user's events) for the held-out evaluation.
        eval_policies: baselines evaluated beside the model each round (``runtime.scoring.baselines`` names + oracle).
        final_policies: baselines evaluated once, beside the promoted model, for the model card.
        counterfactual_samples: items re-run with forced keep/drop per round to check the labels.
        encoder: ``"onnx"`` (all-MiniLM-L6-v2, production) or ``"hash"`` (fast test double).
        lme_rows: directory of precomputed LongMemEval rows (MIT; ``data/lme`` ships with the repo), split
            by question into training and validation rows; ``None`` = not used.
        log_files: your own labelled chat logs (:mod:`train.logs`); every file must exist and validate.
        locomo_files: LoCoMo-layout conversations (CC BY-NC: research presets only; a model fit on them
            is never promoted to the shipped default).
        locomo_weight: sample-weight multiplier for conversation rows relative to simulated rows.
        sim_weight: sample-weight multiplier of the simulated rows (> 0). Real conversations are what the
            model must rank well; a small weight keeps what the simulator teaches (TTLs, corrections, tool
            results: held-out simulator success) without letting its templated chat decide how real chat is
            ranked (issue 23: at weight 1 the simulator cost a third of the LoCoMo recall).
        promote: ``if_better`` replaces the promoted model only when the candidate scores at least as
            well on the same real validation rows; ``always`` replaces it.
        data_dir: where round datasets are written.
        checkpoints_dir: where the promoted model and its card go; round checkpoints go to its
            ``rounds/`` working folder (git-ignored).
        seed: master seed (torch, numpy, data split).
    """

    rounds: int = 3
    sim: SimConfig = field(default_factory=SimConfig)
    eval_sim: SimConfig = field(default_factory=lambda: SimConfig(n_episodes=16, split="eval", seed=1000))
    agent: AgentConfig = field(default_factory=AgentConfig)
    label: LabelConfig = field(default_factory=LabelConfig)
    fit: FitConfig = field(default_factory=FitConfig)
    eval_capacities: tuple[float, ...] = (0.1, 0.2)
    eval_policies: tuple[str, ...] = ("recency", "oracle")
    final_policies: tuple[str, ...] = ()
    counterfactual_samples: int = 16
    encoder: Literal["onnx", "hash"] = "onnx"
    lme_rows: str | None = None
    log_files: tuple[str, ...] = ()
    locomo_files: tuple[str, ...] = ()
    locomo_weight: float = 1.0
    sim_weight: float = 1.0
    promote: Literal["if_better", "always"] = "if_better"
    data_dir: str = "data"
    checkpoints_dir: str = "checkpoints"
    seed: int = 0

    def __post_init__(self) -> None:
        problems = []
        if self.rounds < 1:
            problems.append(("rounds", "must be >= 1"))
        if not self.eval_capacities or any(not 0 < c <= 1 for c in self.eval_capacities):
            problems.append(("eval_capacities", "need at least one value in (0, 1]"))
        if self.encoder not in ("onnx", "hash"):
            problems.append(("encoder", "must be 'onnx' or 'hash'"))
        if self.sim.split != "train":
            problems.append(("sim.split", "training episodes must use split 'train'"))
        if self.eval_sim.split != "eval":
            problems.append(("eval_sim.split", "evaluation episodes must use split 'eval'"))
        if self.counterfactual_samples < 0:
            problems.append(("counterfactual_samples", "must be >= 0"))
        if not (self.sim_weight > 0 and self.sim_weight < float("inf")):
            problems.append(("sim_weight", "must be a finite number > 0"))
        if self.promote not in ("if_better", "always"):
            problems.append(("promote", "must be 'if_better' or 'always'"))
        if self.locomo_files and Path(self.checkpoints_dir).resolve() == (PRESET_DIR.parents[1] / "checkpoints").resolve():
            problems.append(("checkpoints_dir", "a model fit on LoCoMo (CC BY-NC) must never become the shipped "
                                                "default: write it elsewhere (the research preset uses "
                                                "checkpoints/research)"))
        missing = [f for f in self.log_files if not Path(f).is_file()]
        if missing:
            problems.append(("log_files", f"not found: {missing}"))
        if problems:
            raise ValidationError("invalid TrainConfig — " + "; ".join(f"{f}: {m}" for f, m in problems),
                                  field=problems[0][0], problems=problems)

    def to_dict(self) -> dict[str, Any]:
        """Resolved config as plain data (written next to every round's checkpoint)."""
        return _plain(dataclasses.asdict(self))


def _plain(x: Any) -> Any:
    if isinstance(x, dict):
        return {k: _plain(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [_plain(v) for v in x]
    return x


_NESTED = {"sim": SimConfig, "eval_sim": SimConfig, "agent": AgentConfig, "label": LabelConfig, "fit": FitConfig}


def from_dict(d: dict[str, Any]) -> TrainConfig:
    """Build a TrainConfig from plain data, naming the field on any error."""
    valid = {f.name for f in dataclasses.fields(TrainConfig)}
    unknown = sorted(set(d) - valid)
    if unknown:
        raise ValidationError(f"unknown TrainConfig field(s) {unknown}; valid: {sorted(valid)}", field=unknown[0])
    kw: dict[str, Any] = {}
    for k, v in d.items():
        if k in _NESTED and isinstance(v, dict):
            cls = _NESTED[k]
            names = {f.name for f in dataclasses.fields(cls)}
            bad = sorted(set(v) - names)
            if bad:
                raise ValidationError(f"unknown field(s) {bad} in {k}; valid: {sorted(names)}", field=f"{k}.{bad[0]}")
            if k == "eval_sim":
                v = {"split": "eval", **v}
            try:
                kw[k] = cls(**v)
            except ValidationError:
                raise
            except (TypeError, ValueError) as e:
                raise ValidationError(f"{k}: {e}", field=k) from e
        elif isinstance(v, list):
            kw[k] = tuple(v)
        else:
            kw[k] = v
    return TrainConfig(**kw)


def load_preset(name_or_path: str, **overrides: Any) -> TrainConfig:
    """Load ``train/configs/<name>.yaml`` (or a YAML path) and apply top-level overrides."""
    p = Path(name_or_path)
    if not p.suffix:
        p = PRESET_DIR / f"{name_or_path}.yaml"
    if not p.exists():
        names = sorted(x.stem for x in PRESET_DIR.glob("*.yaml"))
        raise ValidationError(f"no preset {name_or_path!r}; available: {names}", field="preset")
    data = _read(p, seen=())
    data.update({k: v for k, v in overrides.items() if v is not None})
    return from_dict(data)


def _read(p: Path, seen: tuple[Path, ...]) -> dict[str, Any]:
    """A preset's mapping; ``extends: <preset>`` starts from that preset (top-level keys override)."""
    if p.resolve() in seen:
        raise ValidationError(f"preset {p} extends itself (through {[x.name for x in seen]})", field="extends")
    data = yaml.safe_load(p.read_text(encoding="utf-8")) or {}
    if not isinstance(data, dict):
        raise ValidationError(f"preset {p} must be a mapping of fields", field="preset")
    base = data.pop("extends", None)
    if base is None:
        return data
    q = PRESET_DIR / f"{base}.yaml" if not Path(str(base)).suffix else Path(str(base))
    if not q.exists():
        raise ValidationError(f"preset {p.name} extends {base!r}, which does not exist", field="extends")
    return {**_read(q, (*seen, p.resolve())), **data}
