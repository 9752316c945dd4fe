"""The inspector's two charts as inline SVG, drawn on the server: a utility histogram with the cut
line, and tier sizes over time. No script and no style attribute (the page's content security policy
allows neither inline); colours are SVG presentation attributes."""

from __future__ import annotations

from collections.abc import Sequence
from html import escape
from typing import Any

__all__ = ["histogram_svg", "series_svg"]

KEPT, DROPPED, CUT = "#2b8a3e", "#c92a2a", "#1c7ed6"
_W, _H, _PAD = 640, 220, 36


def histogram_svg(hist: dict[str, Any]) -> str:
    """Stacked bars of kept (green) and dropped (red) items per utility bin, a dashed line at the
    cut (the worst kept item's utility), axis labels at both ends."""
    bins = hist["bins"]
    if not bins:
        return '<p class="empty">No items.</p>'
    top = max(b["kept"] + b["dropped"] for b in bins) or 1
    lo, hi = hist["lo"], hist["hi"]
    bw = (_W - 2 * _PAD) / len(bins)
    scale = (_H - 2 * _PAD) / top
    parts = [f'<svg class="chart" id="utility-histogram" viewBox="0 0 {_W} {_H}" role="img" '
             f'aria-label="utility histogram: kept and dropped items per utility bin">']
    for i, b in enumerate(bins):
        x = _PAD + i * bw
        y = _H - _PAD
        for n, colour, what in ((b["dropped"], DROPPED, "dropped"), (b["kept"], KEPT, "kept")):
            if n:
                h = n * scale
                y -= h
                parts.append(f'<rect x="{x + 1:.1f}" y="{y:.1f}" width="{bw - 2:.1f}" height="{h:.1f}" fill="{colour}">'
                             f'<title>{n} {what}, utility {b["lo"]:.4g}–{b["hi"]:.4g}</title></rect>')
    if hist.get("cut") is not None:
        x = _PAD + (hist["cut"] - lo) / (hi - lo) * (_W - 2 * _PAD)
        parts.append(f'<line id="cut-line" x1="{x:.1f}" x2="{x:.1f}" y1="{_PAD / 2:.1f}" y2="{_H - _PAD:.1f}" '
                     f'stroke="{CUT}" stroke-width="2" stroke-dasharray="5,4"/>'
                     f'<text x="{x + 4:.1f}" y="{_PAD / 2 + 10:.1f}" fill="{CUT}" font-size="12">cut {hist["cut"]:.4g}</text>')
    parts.append(f'<line x1="{_PAD}" x2="{_W - _PAD}" y1="{_H - _PAD}" y2="{_H - _PAD}" stroke="#868e96"/>')
    parts.append(f'<text x="{_PAD}" y="{_H - 10}" font-size="12" fill="#495057">{lo:.4g}</text>')
    parts.append(f'<text x="{_W - _PAD}" y="{_H - 10}" font-size="12" fill="#495057" text-anchor="end">{hi:.4g}</text>')
    parts.append(f'<text x="{_W / 2}" y="{_H - 10}" font-size="12" fill="#495057" text-anchor="middle">utility</text>')
    parts.append(f'<text x="{_PAD - 6}" y="{_PAD}" font-size="12" fill="#495057" text-anchor="end">{top}</text>')
    parts.append("</svg>")
    return "".join(parts)


def series_svg(points: Sequence[dict[str, Any]], keys: Sequence[tuple[str, str]], *, label: str = "at") -> str:
    """Lines of ``point[key]`` over the points in order (one per decision), a legend per key."""
    if not points:
        return '<p class="empty">No decisions yet.</p>'
    top = max(max(float(p[k]) for k, _ in keys) for p in points) or 1.0
    n = len(points)
    step = (_W - 2 * _PAD) / max(n - 1, 1)
    scale = (_H - 2 * _PAD) / top
    parts = [f'<svg class="chart" id="tier-history" viewBox="0 0 {_W} {_H}" role="img" aria-label="tier sizes over time">']
    for j, (key, colour) in enumerate(keys):
        xy = " ".join(f"{_PAD + i * step:.1f},{_H - _PAD - float(p[key]) * scale:.1f}" for i, p in enumerate(points))
        parts.append(f'<polyline points="{xy}" fill="none" stroke="{colour}" stroke-width="2"/>')
        for i, p in enumerate(points):
            parts.append(f'<circle cx="{_PAD + i * step:.1f}" cy="{_H - _PAD - float(p[key]) * scale:.1f}" r="3" '
                         f'fill="{colour}"><title>{escape(str(p[label]))}: {key} {p[key]}</title></circle>')
        parts.append(f'<text x="{_W - _PAD}" y="{_PAD + 14 * j}" font-size="12" fill="{colour}" '
                     f'text-anchor="end">{escape(key)}</text>')
    parts.append(f'<line x1="{_PAD}" x2="{_W - _PAD}" y1="{_H - _PAD}" y2="{_H - _PAD}" stroke="#868e96"/>')
    parts.append(f'<text x="{_PAD}" y="{_H - 10}" font-size="12" fill="#495057">{escape(str(points[0][label]))[:19]}</text>')
    parts.append(f'<text x="{_W - _PAD}" y="{_H - 10}" font-size="12" fill="#495057" text-anchor="end">'
                 f'{escape(str(points[-1][label]))[:19]}</text>')
    parts.append(f'<text x="{_PAD - 6}" y="{_PAD}" font-size="12" fill="#495057" text-anchor="end">{top:g}</text>')
    parts.append("</svg>")
    return "".join(parts)
