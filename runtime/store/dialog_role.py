"""The sub-role of a write nobody named (seed 000 §3.1, §4.4: ``classify_sub_role`` from the dialog).

When no rule or prototype decided and neither the caller nor ``Scope.acting_as`` gave a sub-role,
the shipped role model (:mod:`runtime.scoring.role_weights`) reads the write twice: alone, and in
its live context — the unit mean of the write's vector and of the recent dialog, the scope's last
``policy.recent_window`` writes. When the line alone is clear (a weight of at least
``RoleConfig.model_min_weight``) about another sub-role than its context, the topic changed and the
line wins; otherwise the context's sub-role is filed if its weight reaches the threshold (a short
"yes please" takes the sub-role of the dialog it answers); else none. The model runs only where the store's encoder is the one it was fit
on (else it stays off: a hash or another encoder's vectors mean nothing to it).

The recent dialog is held per scope in the process (``LiveContext.dialog``), read from the store once
and kept current by writes; forgetting anything in the scope drops it.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import TYPE_CHECKING

import numpy as np

from ..annotate.role_classifier import RoleDecision
from ..errors import MemirError
from .scope_core import ScopeCore

if TYPE_CHECKING:
    from ..scoring.role_weights import RoleWeigher

__all__ = ["classify", "classify_many", "remember"]

_LOG = logging.getLogger(__name__)
_UNAVAILABLE: set[str] = set()  # encoders the shipped model cannot read (logged once each)
_LOADED: dict[str, RoleWeigher] = {}  # the shipped model, loaded once per process and encoder


def _weigher(core: ScopeCore) -> RoleWeigher | None:
    from ..scoring.role_weights import default_role_weigher

    enc = core.store.embedder.encoder_id
    if core.role_weigher is not None:
        return core.role_weigher if core.role_weigher.encoder_id == enc else None
    if enc in _UNAVAILABLE:
        return None
    w = _LOADED.get(enc)
    if w is None:
        try:
            w = _LOADED[enc] = default_role_weigher(enc)
        except MemirError as e:  # another encoder, or no model file: the sub-role stays unset
            _UNAVAILABLE.add(enc)
            _LOG.info("sub-roles are not classified by the role model for encoder %s: %s", enc, e)
            return None
    return w


def _dialog(core: ScopeCore) -> list[np.ndarray]:
    live = core.live()
    if live.dialog is None:
        recent = core.tenant.recent_vectors(core.policy.recent_window)
        live.dialog = [np.asarray(v, dtype=np.float32) for v in recent]
    return live.dialog


def classify(core: ScopeCore, vec: np.ndarray, current_role: str) -> RoleDecision | None:
    """The role model's decision for a write of vector ``vec`` (``None``: the model is off or cannot
    read this store's vectors; a decision with no sub-role: no weight reached the threshold)."""
    return classify_many(core, [vec], [current_role])[0]


def classify_many(core: ScopeCore, vecs: Sequence[np.ndarray], current_roles: Sequence[str]
                  ) -> list[RoleDecision | None]:
    """:func:`classify` for several writes against the same recent dialog (a ``write_many`` batch:
    its items join the dialog once they are written), in one model call."""
    from ..retention.plan import recent_context
    from ..scoring.role_weights import context_vector

    cfg = core.store.config.annotate.roles
    if not vecs:
        return []
    weigher = _weigher(core) if cfg.model else None
    if weigher is None:
        return [None] * len(vecs)
    dialog = _dialog(core)
    recent = recent_context(np.stack(dialog)) if dialog else None
    lines = [context_vector(v, None) for v in vecs]
    ctxs = [context_vector(v, recent) for v in vecs] if recent is not None else lines
    w = weigher.predict(np.stack(lines + ctxs))
    t, n = cfg.model_min_weight, len(vecs)
    out: list[RoleDecision | None] = []
    for w_line, w_ctx, current_role in zip(w[:n], w[n:], current_roles):
        top_line, top_ctx = int(np.argmax(w_line)), int(np.argmax(w_ctx))
        if w_line[top_line] >= t and top_line != top_ctx:      # the line is clear on its own: a change of topic
            top, weight = top_line, float(w_line[top_line])
        elif w_ctx[top_ctx] >= t:                               # else the dialog decides (short or vague lines)
            top, weight = top_ctx, float(w_ctx[top_ctx])
        else:
            out.append(RoleDecision(current_role, None, "context", float(w_ctx[top_ctx])))
            continue
        sub = weigher.labels[top]
        out.append(RoleDecision(cfg.parents.get(sub, current_role), sub, "model", weight))
    return out


def remember(core: ScopeCore, vectors: Sequence[np.ndarray]) -> None:
    """Add written vectors to the recent dialog (when it is held)."""
    live = core.live()
    if live.dialog is None or not core.store.config.annotate.roles.model:
        return
    live.dialog.extend(np.asarray(v, dtype=np.float32) for v in vectors)
    del live.dialog[:max(0, len(live.dialog) - core.policy.recent_window)]
