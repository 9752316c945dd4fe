"""The human-readable side of the evaluators: Markdown tables and PNG plots from their JSON.

Plots: recall vs capacity per policy (conversations: evidence recall; synthetic: key-fact recall and
question success), per-category bars on conversations at each capacity, and LongMemEval evidence
recall vs capacity per question type.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ..stream import budget_key, budget_order, budget_text

__all__ = ["markdown", "save_figure", "write_report"]

_CAT_NAMES = {"1": "multi-hop", "2": "temporal", "3": "open-domain", "4": "single-hop"}


def _f(v: Any) -> str:
    return f"{v:.3f}" if isinstance(v, (int, float)) else "–"


_LME_TYPES = ("single-session-user", "single-session-assistant", "single-session-preference", "multi-session",
              "temporal-reasoning", "knowledge-update")


def markdown(payload: dict[str, Any]) -> str:
    """Markdown summary of an evaluation payload (``eval.json``, or ``lme-cv`` / ``lme`` output)."""
    out = ["# memir evaluation", ""]
    lme = payload.get("summary") if "runs" in payload and "summary" in payload else None
    if lme:
        note = payload.get("note", "")
        out += ["## LongMemEval: evidence recall by question type", "", note, "",
                "| policy | p | recall | " + " | ".join(_LME_TYPES) + " |", "|---|---|---|" + "---|" * len(_LME_TYPES)]
        for pol, caps in lme.items():
            for p, cell in sorted(caps.items(), key=lambda kv: budget_order(kv[0])):
                out.append(f"| {pol} | {budget_text(p)} | {_f(cell['recall'])} | "
                           + " | ".join(_f(cell["by_type"].get(t)) for t in _LME_TYPES) + " |")
        out.append("")
    loc = payload.get("locomo")
    if loc:
        out += ["## Conversations (LoCoMo layout): evidence recall, categories 1–4", "",
                (f"Files: {', '.join(loc['args'].get('files', []))}. Retrieval recall@k: share of questions "
                 "with an evidence turn in the top-k of `recall` over the kept memories."), "",
                "| policy | p | recall | " + " | ".join(f"cat {c} ({n})" for c, n in _CAT_NAMES.items())
                + " | retrieval@k |", "|---|---|---|" + "---|" * len(_CAT_NAMES) + "---|"]
        for pol, caps in loc["summary"].items():
            for p, cell in sorted(caps.items(), key=lambda kv: budget_order(kv[0])):
                out.append(f"| {pol} | {budget_text(p)} | {_f(cell['recall'])} | "
                           + " | ".join(_f(cell["by_category"][c]) for c in _CAT_NAMES)
                           + f" | {_f(cell['retrieval_recall_at_k'])} |")
        out.append("")
    sim = payload.get("synthetic")
    if sim:
        keys = ("success", "key_fact_recall", "stale_answer_rate", "forget_precision", "constraint_violations",
                "update_ms_p50", "update_ms_p99")
        out += ["## Simulated tasks, held-out families", "",
                f"{sim['episodes']} episodes of {', '.join(sim['families'])} (eval templates and entities).", "",
                "| policy | p | " + " | ".join(keys) + " |", "|---|---|" + "---|" * len(keys)]
        for r in sim["rows"]:
            out.append(f"| {r['policy']} | {r['capacity']:.2f} | " + " | ".join(_f(r[k]) for k in keys) + " |")
        lk = sim["leakage"]
        out += ["", (f"Cross-user leakage (share of recalled hits from another user, {lk['episodes']} multi-user "
                     f"episodes): typed scopes on {lk['leak_rate_on']:.3f} ({lk['leaks_on']} hits), off (one "
                     f"pooled index) {lk['leak_rate_off']:.3f} ({lk['leaks_off']} hits)."), ""]
    return "\n".join(out)


def _plots(payload: dict[str, Any], out_dir: Path, stem: str = "lme") -> list[Path]:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    paths: list[Path] = []
    lme = payload.get("summary") if "runs" in payload and "summary" in payload else None
    if lme:
        fig, axes = plt.subplots(2, 4, figsize=(16, 7.5))
        panels = [("all questions", None), *[(t, t) for t in _LME_TYPES]]
        for ax, (title, qt) in zip(axes.flat, panels):
            for j, (pol, caps) in enumerate(lme.items()):
                for unit, style in (("turns", "-"), ("tokens", ":")):
                    xs = sorted((x for x in caps if budget_key(x)[0] == unit), key=budget_key)
                    if not xs:
                        continue
                    ys = [caps[x]["recall"] if qt is None else caps[x]["by_type"].get(qt) for x in xs]
                    ax.plot([budget_key(x)[1] for x in xs], [y if y is not None else float("nan") for y in ys],
                            style, marker="o" if unit == "turns" else "s", color=f"C{j % 10}",
                            label=pol if unit == "turns" else f"{pol} (token budget)",
                            lw=2.5 if pol.startswith("utilitynet") else 1.2)
            ax.set(title=title, xlabel="capacity p (share of turns; dotted: of tokens)", ylabel="evidence recall", ylim=(0, 1.02))
            ax.grid(alpha=0.3)
        handles, labels = axes.flat[0].get_legend_handles_labels()
        axes.flat[-1].axis("off")
        axes.flat[-1].legend(handles, labels, loc="center", fontsize=9)
        fig.suptitle("LongMemEval: evidence recall vs capacity")
        fig.tight_layout()
        paths.append(out_dir / f"{stem}_recall_by_type.png")
        fig.savefig(paths[-1], dpi=110)
        plt.close(fig)
    loc = payload.get("locomo")
    if loc:
        fig, ax = plt.subplots(figsize=(8, 4.5))
        for j, (pol, caps) in enumerate(loc["summary"].items()):
            for unit, style in (("turns", "-"), ("tokens", ":")):
                xs = sorted((x for x in caps if budget_key(x)[0] == unit), key=budget_key)
                if xs:
                    ax.plot([budget_key(x)[1] for x in xs], [caps[x]["recall"] for x in xs], style,
                            marker="o" if unit == "turns" else "s", color=f"C{j % 10}",
                            label=pol if unit == "turns" else f"{pol} (token budget)")
        ax.set(xlabel="capacity p (share of turns kept; dotted: of tokens)", ylabel="evidence recall (cat 1–4)",
               title="Conversations: recall vs capacity")
        ax.grid(alpha=0.3)
        ax.legend(fontsize=7, loc="center left", bbox_to_anchor=(1.01, 0.5))
        fig.tight_layout()
        paths.append(out_dir / "locomo_recall_vs_capacity.png")
        fig.savefig(paths[-1], dpi=120)
        plt.close(fig)
        caps_all = sorted({p for c in loc["summary"].values() for p in c}, key=budget_order)
        fig, axes = plt.subplots(1, len(caps_all), figsize=(4.5 * len(caps_all), 4), squeeze=False)
        pols = list(loc["summary"])
        width = 0.8 / max(len(pols), 1)
        for ax, p in zip(axes[0], caps_all):
            for j, pol in enumerate(pols):
                cell = loc["summary"][pol].get(p)
                if not cell:
                    continue
                vals = [cell["by_category"][c] or 0.0 for c in _CAT_NAMES]
                ax.bar([i + j * width for i in range(len(_CAT_NAMES))], vals, width, label=pol)
            ax.set_xticks([i + 0.4 - width / 2 for i in range(len(_CAT_NAMES))], list(_CAT_NAMES.values()),
                          fontsize=8)
            ax.set(title=f"p = {budget_text(p)}", ylabel="evidence recall", ylim=(0, 1))
        axes[0][-1].legend(fontsize=6)
        fig.tight_layout()
        paths.append(out_dir / "locomo_by_category.png")
        fig.savefig(paths[-1], dpi=120)
        plt.close(fig)
    sim = payload.get("synthetic")
    if sim:
        fig, axes = plt.subplots(1, 2, figsize=(10, 4))
        for ax, key in zip(axes, ("key_fact_recall", "success")):
            series: dict[str, list[tuple[float, float]]] = {}
            for r in sim["rows"]:
                series.setdefault(r["policy"], []).append((r["capacity"], r[key]))
            for pol, pts in series.items():
                pts.sort()
                ax.plot([x for x, _ in pts], [y for _, y in pts], marker="o", label=pol)
            ax.set(xlabel="capacity (share of a user's events)", ylabel=key.replace("_", " "),
                   title=f"Held-out families: {key.replace('_', ' ')}")
            ax.grid(alpha=0.3)
        axes[1].legend(fontsize=7)
        fig.tight_layout()
        paths.append(out_dir / "synthetic_recall_vs_capacity.png")
        fig.savefig(paths[-1], dpi=120)
        plt.close(fig)
    return paths


def save_figure(fig: Any, path: str | Path, dpi: int = 120) -> Path:
    """Lay out ``fig``, write it to ``path`` (parents created) and close it."""
    import matplotlib.pyplot as plt

    fig.tight_layout()
    p = Path(path)
    p.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(p, dpi=dpi)
    plt.close(fig)
    return p


def write_report(payload: dict[str, Any], json_path: Path) -> str:
    """Write ``<json_path stem>.md`` and the PNG plots beside ``json_path``; returns the Markdown."""
    out_dir = json_path.parent
    out_dir.mkdir(parents=True, exist_ok=True)
    pngs = _plots(payload, out_dir, json_path.stem)
    md = markdown(payload) + "\n" + "\n".join(f"![{p.stem}]({p.name})" for p in pngs) + "\n"
    json_path.with_suffix(".md").write_text(md)
    return md
