"""One table and one figure for the seed features' evaluations (issue 15), built from their reports.

Each evaluation is its own command and writes its own JSON (``python -m train.eval summaries``,
``tiers``, ``discovery``, ``confusion``); :func:`seeds_table` reads those measured reports — it
computes nothing and hard-codes nothing — and :func:`plot_seeds` draws the four side by side.
A report that is missing is named in the table with the command that makes it.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from .report import save_figure

__all__ = ["REPORTS", "load_reports", "plot_seeds", "seeds_table"]

REPORTS = {
    "summaries": "python -m train.eval summaries --out reports/summaries.json",
    "tiers": "python -m train.eval tiers --out reports/tiers.json",
    "discovery": "python -m train.eval discovery --out reports/discovery.json",
    "confusion": "python -m train.eval confusion --out reports/confusion.json",
}


def load_reports(directory: str | Path = "reports") -> dict[str, dict[str, Any] | None]:
    """The four reports by name (``None`` for one not written yet)."""
    out: dict[str, dict[str, Any] | None] = {}
    for name in REPORTS:
        p = Path(directory) / f"{name}.json"
        out[name] = json.loads(p.read_text()) if p.exists() else None
    return out


def _f(x: Any, nd: int = 3) -> str:
    return "—" if x is None else f"{float(x):.{nd}f}"


def _probes(p: Any) -> Any:
    return p.get("total") if isinstance(p, dict) else p


def seeds_table(reports: dict[str, dict[str, Any] | None]) -> str:
    """A Markdown table: feature, metric, memir's result, the baseline or comparison, data."""
    rows: list[tuple[str, str, str, str, str]] = []
    s = reports.get("summaries")
    if s:
        u, lead, lng = (s["summary"][m] for m in ("utility", "lead", "longest"))
        rows.append(("session summaries", "coverage: evidence turns whose key facts survive in the summary",
                     f"{_f(u['coverage'])} (archived turns {_f(u['coverage_demoted'])})",
                     f"first sentences {_f(lead['coverage'])}, longest turns {_f(lng['coverage'])}",
                     f"LongMemEval dev, {s['questions']} held-out questions, {s['evidence_turns']} evidence turns"))
    t = reports.get("tiers")
    if t:
        f, k = t["summary"], t["k"]
        cold = [x for x in ("int8", "float16") if x in f]
        rows.append(("cold tier", f"recall@{k} loss vs float32 (archive recall)",
                     "; ".join(f"{x} {_f(f[x]['loss'])} ({f[x]['questions_changed']} questions changed, "
                               f"{f[x]['bytes_per_vector']:.0f} B/vector)" for x in cold),
                     f"float32 recall@{k} {_f(f['float32'][f'recall@{k}'])} at "
                     f"{f['float32']['bytes_per_vector']:.0f} B/vector",
                     f"LongMemEval dev, {t['questions']} questions, {t['turns']} archived turns"))
    d = reports.get("discovery")
    if d:
        m = str(d["default_min_cluster_size"])
        r = d["summary"][m]
        rows.append(("type discovery", f"purity / recall of the planted category (min cluster size {m})",
                     f"{_f(r['purity'])} / {_f(r['recall'])}", f"{_f(r['undescribed_precision'])} of undescribed "
                     f"clusters' members are planted", f"simulator, {d['episodes']} episodes, "
                     f"{d['n_planted']} planted memories each"))
    c = reports.get("confusion")
    if c:
        ty, un = c["summary"]["typed"], c["summary"]["untyped"]
        for key, label in (("cross_user_confusion", "another user's memory in the top-k ↓"),
                           ("rumour_over_spec", "rumour ranked over the spec ↓"),
                           ("role_consistency", "role consistency ↑"),
                           ("citation_accuracy", "citation accuracy ↑")):
            rows.append(("confusion", label, f"typed {_f(ty[key])}", f"untyped pooled {_f(un[key])}",
                         f"generated, {c['users']} users, {_probes(c['probes'])} probes, k = {c['k']}"))
    lines = ["| feature | metric | memir | comparison | data |", "|---|---|---|---|---|"]
    lines += [f"| {' | '.join(r)} |" for r in rows]
    missing = [f"- {n}: not measured yet — `{cmd}`" for n, cmd in REPORTS.items() if not reports.get(n)]
    return "\n".join(lines + ([""] + missing if missing else []))


def plot_seeds(reports: dict[str, dict[str, Any] | None], path: str | Path) -> Path:
    """Four panels — summary coverage, cold-tier recall and bytes, discovery purity/recall, confusion
    typed vs untyped — from the reports present."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 4, figsize=(18, 4.2))

    def bars(ax: Any, labels: list[str], values: list[float], title: str, colors: Any = None) -> None:
        b = ax.bar(labels, values, color=colors)
        ax.bar_label(b, fmt="%.3f", fontsize=8)
        ax.set_ylim(0, 1.1)
        ax.set_title(title, fontsize=10)
        ax.tick_params(axis="x", labelsize=8)

    for ax, name in zip(axes, REPORTS):
        r = reports.get(name)
        if not r:
            ax.text(0.5, 0.5, f"{name}: not measured", ha="center", va="center")
            ax.set_axis_off()
            continue
        if name == "summaries":
            ms = ("utility", "lead", "longest")
            bars(ax, ["utility-ranked", "first sentences", "longest turns"],
                 [r["summary"][m]["coverage"] for m in ms], "summary coverage (LongMemEval dev)")
        elif name == "tiers":
            fs, k = list(r["summary"]), r["k"]
            bars(ax, [f"{x}\n{r['summary'][x]['bytes_per_vector']:.0f} B" for x in fs],
                 [r["summary"][x][f"recall@{k}"] for x in fs], f"archive recall@{k} by vector format")
        elif name == "discovery":
            sizes = sorted(r["summary"], key=int)
            x = range(len(sizes))
            ax.plot(x, [r["summary"][m]["purity"] for m in sizes], "o-", label="purity")
            ax.plot(x, [r["summary"][m]["recall"] for m in sizes], "s-", label="recall")
            ax.set_xticks(list(x), [f"min {m}" for m in sizes], fontsize=8)
            ax.set_ylim(0, 1.1)
            ax.legend(fontsize=8)
            ax.set_title("type discovery (planted category)", fontsize=10)
        else:
            keys = ("cross_user_confusion", "rumour_over_spec", "role_consistency", "citation_accuracy")
            short = ("cross-user ↓", "rumour>spec ↓", "role cons. ↑", "citations ↑")
            pos = range(len(keys))
            w = 0.4
            for off, side, col in ((-w / 2, "typed", "tab:blue"), (w / 2, "untyped", "tab:gray")):
                b = ax.bar([p + off for p in pos], [r["summary"][side][k] for k in keys], w, label=side, color=col)
                ax.bar_label(b, fmt="%.2f", fontsize=7)
            ax.set_xticks(list(pos), short, fontsize=8)
            ax.set_ylim(0, 1.15)
            ax.legend(fontsize=8)
            ax.set_title("confusion: typed vs untyped pooled", fontsize=10)
    fig.suptitle("memir seed features — each panel from its own measured report (reports/*.json)", fontsize=11)
    return save_figure(fig, path, dpi=110)
