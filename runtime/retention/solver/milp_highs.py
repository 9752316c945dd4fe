"""HiGHS called directly on a (reduced) retention MILP — no modelling layer, exact gap settings.

:mod:`.exact` uses it for the *core* left after Lagrangian fixing when a budget or quotas are
involved, and for the whole reduced problem when a rule-connected component is too large to
enumerate. Loose items (in no rule) may be passed as continuous [0,1] columns: with a count
capacity and no budget, for any integral choice of the other columns the LP over a sorted list
under one unit-coefficient row has an integral optimum, so relaxing them loses nothing.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ...errors import MissingDependencyError, SolverError
from .reasons import Status

__all__ = ["INSTALL", "import_highspy", "lp_duals", "retention_milp"]

INSTALL = "pip install 'memir-runtime[solver]'"


def import_highspy() -> Any:
    """Import highspy or raise :class:`MissingDependencyError` with the install command."""
    try:
        import highspy
    except ImportError as e:
        raise MissingDependencyError(
            "the exact retention solver needs HiGHS for this problem shape (quotas, non-integer weights, or "
            f"several shared limits); run: {INSTALL}"
        ) from e
    return highspy


def _build(hp: Any, u: np.ndarray, cols: np.ndarray, n_integer: int, imp: np.ndarray, exc: np.ndarray,
           quotas: list[tuple[np.ndarray, int, int]], cap: int | None, penalty: float | None,
           weights: np.ndarray | None, budget: float | None) -> tuple[Any, dict[str, int]]:
    """The HighsLp, and the row numbers of the shared limits (``cap``, ``budget``, ``quota<j>``)."""
    n_col = len(cols)
    soft = penalty is not None and cap is not None
    pos = np.full(len(u), -1, np.int64)
    pos[cols] = np.arange(n_col)
    starts: list[int] = [0]
    index: list[np.ndarray] = []
    value: list[np.ndarray] = []
    lower: list[float] = []
    upper: list[float] = []
    rows: dict[str, int] = {}

    def row(idx: np.ndarray, val: np.ndarray, lo: float, hi: float, key: str | None = None) -> None:
        if key is not None:
            rows[key] = len(lower)
        index.append(idx)
        value.append(val)
        starts.append(starts[-1] + len(idx))
        lower.append(lo)
        upper.append(hi)

    inf = np.inf
    if len(imp):
        for a, b in pos[imp].tolist():
            row(np.array([a, b]), np.array([1.0, -1.0]), -inf, 0.0)
    if len(exc):
        for a, b in pos[exc].tolist():
            row(np.array([a, b]), np.array([1.0, 1.0]), -inf, 1.0)
    for j, (mem, lo, hi) in enumerate(quotas):
        row(pos[mem], np.ones(len(mem)), float(lo), inf if hi < 0 else float(hi), f"quota{j}")
    if cap is not None:
        if soft:  # Σx − o ≤ cap, o ≥ 0 costs `penalty` per unit
            row(np.append(np.arange(n_col), n_col), np.append(np.ones(n_col), -1.0), -inf, float(cap), "cap")
        else:
            row(np.arange(n_col), np.ones(n_col), -inf, float(cap), "cap")
    if budget is not None and weights is not None:
        row(np.arange(n_col), weights[cols].astype(np.float64), -inf, float(budget), "budget")
    total = n_col + (1 if soft else 0)
    lp = hp.HighsLp()
    lp.num_col_ = total
    lp.num_row_ = len(lower)
    cost = u[cols].astype(np.float64)
    lp.col_cost_ = np.append(cost, -float(penalty)) if soft else cost  # type: ignore[arg-type]
    lp.col_lower_ = np.zeros(total)
    lp.col_upper_ = np.append(np.ones(n_col), inf) if soft else np.ones(n_col)
    lp.row_lower_ = np.array(lower, np.float64)
    lp.row_upper_ = np.array(upper, np.float64)
    lp.sense_ = hp.ObjSense.kMaximize
    lp.a_matrix_.format_ = hp.MatrixFormat.kRowwise
    lp.a_matrix_.start_ = np.array(starts, np.int32)
    lp.a_matrix_.index_ = np.concatenate(index).astype(np.int32) if index else np.zeros(0, np.int32)
    lp.a_matrix_.value_ = np.concatenate(value).astype(np.float64) if value else np.zeros(0)
    lp.integrality_ = [hp.HighsVarType.kInteger] * n_integer + [hp.HighsVarType.kContinuous] * (total - n_integer)
    return lp, rows


def _highs(hp: Any, lp: Any, time_limit_s: float) -> Any:
    # The public ``highspy.Highs`` wrapper prints a licence banner to stdout on first use, which
    # would corrupt an agent's or a CLI's stdout; the core class it wraps is silent with
    # output_flag off and has the same methods. Fall back to the wrapper if the layout changes.
    core = getattr(getattr(hp, "_core", None), "_Highs", None)
    h = core() if core is not None else hp.Highs()
    h.setOptionValue("output_flag", False)
    h.setOptionValue("time_limit", float(time_limit_s))
    h.setOptionValue("mip_rel_gap", 0.0)
    h.setOptionValue("mip_abs_gap", 1e-9)
    if h.passModel(lp) == hp.HighsStatus.kError:
        raise SolverError("HiGHS rejected the reduced retention model (a bug in memir; please report it)")
    h.run()
    return h


def lp_duals(u: np.ndarray, cols: np.ndarray, *, imp: np.ndarray, exc: np.ndarray,
             quotas: list[tuple[np.ndarray, int, int]], cap: int | None, penalty: float | None,
             weights: np.ndarray | None, budget: float | None, time_limit_s: float,
             ) -> dict[str, float] | None:
    """Prices of the shared limits from the LP relaxation (None if the LP is not solved).

    Keys: ``cap``, ``budget``, ``quota<j>_max``, ``quota<j>_min`` — all ≥ 0, in utility per unit
    of the limit. Good Lagrange multipliers in one solve (LP duality).
    """
    hp = import_highspy()
    lp, rows = _build(hp, u, cols, 0, imp, exc, quotas, cap, penalty, weights, budget)
    h = _highs(hp, lp, time_limit_s)
    if h.getModelStatus() != hp.HighsModelStatus.kOptimal:
        return None
    sol = h.getSolution()
    dual, act = np.abs(np.asarray(sol.row_dual)), np.asarray(sol.row_value)
    out: dict[str, float] = {}
    for key, r in rows.items():
        if key.startswith("quota"):
            at_min = act[r] <= lp.row_lower_[r] + 1e-9 and lp.row_lower_[r] > 0
            out[key + ("_min" if at_min else "_max")] = float(dual[r])
        else:
            out[key] = float(dual[r])
    return out


def retention_milp(u: np.ndarray, cols: np.ndarray, *, n_integer: int, imp: np.ndarray, exc: np.ndarray,
                   quotas: list[tuple[np.ndarray, int, int]], cap: int | None, penalty: float | None,
                   weights: np.ndarray | None, budget: float | None, time_limit_s: float,
                   ) -> tuple[np.ndarray | None, Status | None]:
    """Maximise ``Σ u_c x_c`` (− penalty·overflow) over columns ``cols`` (item indices).

    Args:
        u: utilities of all items. cols: the items modelled; the first ``n_integer`` are binary, the
            rest continuous in [0, 1].
        imp, exc: rule pairs (item indices, all inside ``cols``). quotas: ``(members, lo, hi)``
            with ``hi = -1`` for no maximum.
        cap: ``Σx ≤ cap`` (soft when ``penalty`` is set), or None. weights/budget: ``Σ w·x ≤ budget``.
        time_limit_s: HiGHS time limit.

    Returns:
        ``(x over cols, status)``; x None with status None = infeasible, with
        ``TIME_LIMIT_GREEDY_FALLBACK`` = time limit without an incumbent.
    """
    hp = import_highspy()
    n_col = len(cols)
    if n_col == 0:
        ok = all(lo <= 0 for _, lo, _ in quotas) and (cap is None or penalty is not None or cap >= 0) \
            and (budget is None or budget >= 0)
        return (np.zeros(0), Status.OPTIMAL) if ok else (None, None)
    lp, _ = _build(hp, u, cols, n_integer, imp, exc, quotas, cap, penalty, weights, budget)
    h = _highs(hp, lp, time_limit_s)
    ms = h.getModelStatus()
    if ms in (hp.HighsModelStatus.kInfeasible, hp.HighsModelStatus.kUnboundedOrInfeasible):
        return None, None
    status = Status.OPTIMAL
    if ms != hp.HighsModelStatus.kOptimal:
        has_incumbent = h.getInfo().primal_solution_status == 2
        if ms in (hp.HighsModelStatus.kTimeLimit, hp.HighsModelStatus.kInterrupt) and has_incumbent:
            status = Status.TIME_LIMIT_INCUMBENT
        elif ms == hp.HighsModelStatus.kTimeLimit:
            return None, Status.TIME_LIMIT_GREEDY_FALLBACK
        else:
            raise SolverError(f"HiGHS stopped with status {h.modelStatusToString(ms)} on the reduced "
                              "retention model; try method='cvxpy' or report the problem")
    return np.asarray(h.getSolution().col_value)[:n_col], status
