"""Fit and export the role-weight model (seed 000 §5.2.3): embeddings -> a softmax over sub-roles.

Data (both generated here, nothing downloaded, no LoCoMo):

- **simulator** memories (:mod:`train.simulate`) labelled with their sub-role — the task phase of
  the family (``intake``, ``diagnosis``, ``booking``...) — from the events that carry the phase's
  content (key facts, updates, distractors, tool results);
- a **support desk** set: templated customer-support turns labelled ``billing``, ``technical``,
  ``complaints`` or ``account`` (the seed's example: a support agent drifting to technical terms).

Both are split by template/entity pool: the model is fit on the ``train`` half and evaluated on the
``eval`` half (unseen templates and entities): accuracy and top-2 accuracy, plus a drift scenario —
a support session that starts on billing and moves to technical terms, where the ``technical``
weight must rise.

Model: multinomial logistic regression (scikit-learn) on unit vectors, exported as ONNX ``Gemm`` +
``Softmax`` (opset 17): input ``context`` ``(n, dim)`` float32, output ``weights`` ``(n, labels)``.
The card (``.json`` next to the model) lists the labels, encoder id and width, the file's sha256
and this summary; :class:`runtime.scoring.role_weights.RoleWeigher` checks all of it on load.

Usage:
    python -m train.fit.role_weights --out checkpoints/role_weights.onnx   # real MiniLM encoder (~1 min)
"""

from __future__ import annotations

import argparse
import itertools
import json
import random
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from runtime.encoders import Embedder
from runtime.integrity import file_sha256
from runtime.scoring.role_weights import (
    ROLE_INPUT,
    ROLE_MODEL_KIND,
    ROLE_OUTPUT,
    RoleWeigher,
    card_path_for,
    context_vector,
)

__all__ = ["DRIFT_SESSION", "SUPPORT_DESK", "RoleData", "build_data", "export_onnx", "fit", "main", "train_and_export"]

OPSET = 17
SIM_KINDS = ("key_fact", "update", "distractor", "tool_result")

# (train templates, eval templates) per support-desk sub-role.
SUPPORT_DESK: dict[str, tuple[tuple[str, ...], tuple[str, ...]]] = {
    "billing": (
        ("I was charged twice for my {plan} subscription this month.",
         "Please refund the {amount} overcharge on invoice {inv}.",
         "My card payment of {amount} was declined at checkout.",
         "Why did my monthly bill go up to {amount}?",
         "I need a receipt for the {amount} payment on my {plan} plan.",
         "The promo code was not applied to invoice {inv}."),
        ("I was billed {amount} even though I cancelled the {plan} plan.",
         "Can you switch my payment method and resend invoice {inv}?",
         "There is a {amount} charge on my statement I don't recognise.",
         "Stop the auto-renewal before the next billing cycle of my {plan} plan."),
    ),
    "technical": (
        ("The app crashes with error {code} when I open settings on my {device}.",
         "After the firmware update my {device} won't boot anymore.",
         "Login fails with a server error {code} every time.",
         "The sync times out and the log shows error {code}.",
         "Bluetooth pairing fails on my {device} after the latest patch.",
         "Reinstalling the driver on my {device} did not fix the blank screen."),
        ("My {device} keeps dropping the Wi-Fi connection since the update, error {code}.",
         "The API returns a timeout and a stack trace with code {code}.",
         "I cleared the cache but the {device} still freezes on startup.",
         "The database lock error {code} stops the export halfway."),
    ),
    "complaints": (
        ("This is unacceptable, I want to speak to a manager about order {inv}.",
         "Your agent was rude to me on the phone yesterday.",
         "I have waited three weeks and nobody answered my emails.",
         "I want to file a formal complaint about how my {device} return was handled.",
         "I'm very disappointed, this is the worst service I've had.",
         "Nobody called me back as promised, this is ridiculous."),
        ("I'm furious that my case was closed without asking me.",
         "I expect an apology and compensation for this mess with order {inv}.",
         "Three agents gave me three different answers, I'm fed up.",
         "I will leave a one-star review unless someone fixes this today."),
    ),
    "account": (
        ("Please change the email address on my account.",
         "Add my partner as a second user on the {plan} account.",
         "I want to close my account and delete my profile.",
         "Update the phone number linked to my account.",
         "Merge my two accounts into the one on the {plan} plan.",
         "Change the username on my profile."),
        ("Transfer the account ownership to my colleague.",
         "Remove my old address from my profile.",
         "Please rename the account holder to my married name.",
         "Downgrade my profile to a basic {plan} membership without changing anything else."),
    ),
}

_FILLS: dict[str, tuple[tuple[str, ...], tuple[str, ...]]] = {
    "plan": (("Premium", "Family", "Pro"), ("Business", "Starter")),
    "amount": (("$49", "$120", "$15.99"), ("$89", "$230")),
    "inv": (("INV-2041", "INV-7730", "INV-1193"), ("INV-5508", "INV-8862")),
    "code": (("0x80070005", "E42", "503"), ("ERR_TIMEOUT", "E17")),
    "device": (("laptop", "router", "phone"), ("tablet", "smart TV")),
}

DRIFT_SESSION = (
    "Hi, I have a question about my invoice for this month.",
    "I was charged $49 twice for the Premium subscription.",
    "Also the app has been crashing since the last update.",
    "It shows error 0x80070005 and the sync times out.",
    "Reinstalling the driver did not fix the crash either.",
)
"""A support session drifting from billing to technical terms (the evaluation scenario)."""


def support_desk(split: str) -> list[tuple[str, str]]:
    """``(text, sub_role)`` rows of the support-desk set for ``"train"`` or ``"eval"``."""
    i = 0 if split == "train" else 1
    rows: list[tuple[str, str]] = []
    for label, halves in SUPPORT_DESK.items():
        for tpl in halves[i]:
            keys = [k for k in _FILLS if "{" + k + "}" in tpl]
            for combo in itertools.product(*(_FILLS[k][i] for k in keys)):
                rows.append((tpl.format(**dict(zip(keys, combo))), label))
    return rows


def simulator_rows(split: str, n_episodes: int, seed: int) -> list[tuple[str, str]]:
    """``(text, sub_role)`` of simulator events of the phase-bearing kinds (distinct texts)."""
    from ..simulate import SimConfig, generate

    if split == "train":  # every family, train templates and entity pools
        cfg = SimConfig(n_episodes=n_episodes, seed=seed, split="train", held_out_families=())
    else:  # every family, eval templates and entity pools
        cfg = SimConfig(n_episodes=n_episodes, seed=seed, split="eval", eval_families="all")
    seen: dict[str, str] = {}
    for ep in generate(cfg):
        for ev in ep.events:
            if ev.kind.value in SIM_KINDS and ev.sub_role and ev.content not in seen:
                seen[ev.content] = ev.sub_role
    return list(seen.items())


@dataclass
class RoleData:
    """Texts and labels of one split."""

    texts: list[str]
    labels: list[str]


def build_data(split: str, *, n_episodes: int, seed: int = 0, max_sim: int | None = None) -> RoleData:
    """Simulator + support-desk rows of a split (simulator rows capped at ``max_sim``, seeded)."""
    sim = simulator_rows(split, n_episodes, seed)
    if max_sim is not None and len(sim) > max_sim:
        sim = random.Random(seed).sample(sim, max_sim)
    rows = sim + support_desk(split)
    return RoleData([t for t, _ in rows], [lab for _, lab in rows])


def fit(X: np.ndarray, y: Sequence[str], *, C: float = 10.0, seed: int = 0) -> tuple[np.ndarray, np.ndarray, list[str]]:
    """Multinomial logistic regression: ``(coef (L, d), intercept (L,), labels)``."""
    from sklearn.linear_model import LogisticRegression

    clf = LogisticRegression(C=C, max_iter=2000, class_weight="balanced", random_state=seed)
    clf.fit(np.asarray(X, dtype=np.float64), list(y))
    return (np.asarray(clf.coef_, dtype=np.float32), np.asarray(clf.intercept_, dtype=np.float32),
            [str(c) for c in clf.classes_])


def export_onnx(coef: np.ndarray, intercept: np.ndarray, labels: Sequence[str], *, encoder_id: str,
                out: str | Path, training: dict[str, Any] | None = None) -> Path:
    """Write ``softmax(x · coefᵀ + intercept)`` as ONNX (opset 17) and its card next to it."""
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    W = np.ascontiguousarray(np.asarray(coef, dtype=np.float32).T)  # (d, L)
    b = np.asarray(intercept, dtype=np.float32).reshape(-1)
    d, n = W.shape
    if n != len(labels) or b.shape != (n,):
        raise ValueError(f"coef {coef.shape}, intercept {b.shape} and {len(labels)} labels disagree")
    graph = helper.make_graph(
        [helper.make_node("Gemm", [ROLE_INPUT, "W", "b"], ["logits"]),
         helper.make_node("Softmax", ["logits"], [ROLE_OUTPUT], axis=1)],
        "role_weights",
        [helper.make_tensor_value_info(ROLE_INPUT, TensorProto.FLOAT, ["n", d])],
        [helper.make_tensor_value_info(ROLE_OUTPUT, TensorProto.FLOAT, ["n", n])],
        [numpy_helper.from_array(W, "W"), numpy_helper.from_array(b, "b")])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", OPSET)], producer_name="memir")
    model.ir_version = 8
    helper.set_model_props(model, {"memir.model": ROLE_MODEL_KIND, "memir.labels": json.dumps(list(labels)),
                                   "memir.encoder_id": encoder_id, "memir.embedding_dim": str(d)})
    onnx.checker.check_model(model)
    path = Path(out)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(model.SerializeToString())
    card = {"model": ROLE_MODEL_KIND, "labels": list(labels), "encoder_id": encoder_id, "embedding_dim": d,
            "sha256": file_sha256(path), "opset": OPSET, "training": training or {}}
    card_path_for(path).write_text(json.dumps(card, indent=2) + "\n", encoding="utf-8")
    return path


def _accuracy(P: np.ndarray, labels: Sequence[str], y: Sequence[str]) -> tuple[float, float]:
    idx = {lab: i for i, lab in enumerate(labels)}
    truth = np.array([idx.get(t, -1) for t in y])
    order = np.argsort(-P, axis=1)
    top1 = float(np.mean(order[:, 0] == truth))
    top2 = float(np.mean((order[:, 0] == truth) | (order[:, 1] == truth)))
    return top1, top2


def drift_curve(weigher: RoleWeigher, embedder: Embedder, label: str = "technical",
                session: Sequence[str] = DRIFT_SESSION) -> list[float]:
    """The ``label`` weight after each turn of a session: context = query (the turn) + the unit
    mean of the turns so far, as recall computes it."""
    V = np.asarray(embedder.encode(list(session)), dtype=np.float32)
    out = []
    for i in range(len(V)):
        recent = V[:i].mean(axis=0) if i else None
        out.append(weigher.weights(context_vector(V[i], recent))[label])
    return out


def train_and_export(embedder: Embedder, out: str | Path, *, n_episodes: int = 24, eval_episodes: int = 8,
                     max_sim: int | None = 1500, seed: int = 0, C: float = 10.0) -> dict[str, Any]:
    """Build the data, fit, export, reload with the runtime loader, evaluate; return the summary."""
    t0 = time.perf_counter()
    tr = build_data("train", n_episodes=n_episodes, seed=seed, max_sim=max_sim)
    ev = build_data("eval", n_episodes=eval_episodes, seed=seed + 1, max_sim=max_sim)
    Xtr = np.asarray(embedder.encode(tr.texts), dtype=np.float32)
    Xev = np.asarray(embedder.encode(ev.texts), dtype=np.float32)
    coef, intercept, labels = fit(Xtr, tr.labels, C=C, seed=seed)
    summary: dict[str, Any] = {
        "data": "simulator sub-role memories (train/eval template splits) + templated support-desk turns",
        "train_rows": len(tr.texts), "eval_rows": len(ev.texts), "episodes": [n_episodes, eval_episodes],
        "seed": seed, "C": C, "license_note": "generated data only (no LoCoMo, nothing downloaded)",
    }
    path = export_onnx(coef, intercept, labels, encoder_id=embedder.encoder_id, out=out, training=summary)
    weigher = RoleWeigher(path, encoder_id=embedder.encoder_id)
    P = weigher.predict(Xev)
    top1, top2 = _accuracy(P, labels, ev.labels)
    desk = [i for i, lab in enumerate(ev.labels) if lab in SUPPORT_DESK]
    d1, _ = _accuracy(P[desk], labels, [ev.labels[i] for i in desk])
    summary.update({"eval_accuracy": round(top1, 4), "eval_top2": round(top2, 4),
                    "eval_support_desk_accuracy": round(d1, 4), "labels": len(labels)})
    if "technical" in labels:
        summary["drift_technical_weight"] = [round(x, 4) for x in drift_curve(weigher, embedder)]
    summary["seconds"] = round(time.perf_counter() - t0, 1)
    # the card carries the evaluation too: rewrite it (the ONNX file, and so its sha256, is unchanged)
    cpath = card_path_for(path)
    card = json.loads(cpath.read_text(encoding="utf-8"))
    card["training"] = {k: v for k, v in summary.items() if k != "seconds"}  # the card is reproducible
    cpath.write_text(json.dumps(card, indent=2) + "\n", encoding="utf-8")
    return summary


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m train.fit.role_weights", description=__doc__.split("\n\n")[0])
    p.add_argument("--out", default="checkpoints/role_weights.onnx", help="ONNX file (the card goes next to it)")
    p.add_argument("--episodes", type=int, default=24, help="simulator training episodes")
    p.add_argument("--eval-episodes", type=int, default=8, help="simulator evaluation episodes")
    p.add_argument("--max-sim", type=int, default=1500, help="most simulator rows per split")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--hash-encoder", action="store_true", help="use the HashEmbedder (tests; not for shipping)")
    a = p.parse_args(argv)
    from ..eval.locomo import embedder as make_embedder
    embedder: Embedder = make_embedder("hash" if a.hash_encoder else "onnx")
    summary = train_and_export(embedder, a.out, n_episodes=a.episodes, eval_episodes=a.eval_episodes,
                               max_sim=a.max_sim, seed=a.seed)
    print(json.dumps(summary, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
