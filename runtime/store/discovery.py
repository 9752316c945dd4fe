"""Type discovery: clusters of a scope's memories that no existing label describes (seed 000 §5.2.2).

:func:`discover_types` clusters a scope's stored embeddings with HDBSCAN (scikit-learn, the
``discovery`` extra; imported only when called) and measures, for each cluster, how well the labels
the memories already carry describe it: their ``sub_role``, their provenance ``source_type`` and
their tags. A person reads the exemplars and the distinguishing terms of the undescribed clusters,
names one, and :func:`apply_type` tags its members retroactively (:meth:`Scope.tag`).

**The description score.** For a cluster ``C`` of a scope of ``N`` memories and a label ``L``
(``sub_role=pm``, ``source_type=external_ingest``, ``tag=refund``...)::

    coverage(L) = |C ∩ L| / |C|              share of the cluster carrying L
    lift(L)     = coverage(L) / (|L| / N)    how much more often than in the whole scope

The cluster's *description score* is the highest coverage among labels with ``lift >= min_lift``
(0 when none qualifies), and the cluster is **undescribed** when that score is below
``min_coverage``. Defaults: ``min_coverage=0.6``, ``min_lift=2.0`` — a label on more than half of
the scope (a tag every memory carries, the most common source type) can never describe a cluster,
because it does not tell the cluster apart from the rest.

Everything is deterministic: memories are read in write order, HDBSCAN has no random state, and a
cluster's id is a hash of its sorted member ids, so the same data with the same parameters gives the
same ids (``memir types apply`` re-runs discovery to find the id it is given).

Example:
    >>> report = discover_types(store.scope(user_id="u42"), min_cluster_size=5)   # doctest: +SKIP
    >>> for c in report.undescribed:
    ...     print(c.id, c.size, c.description_score, c.terms, [e.content for e in c.exemplars])
    >>> apply_type(scope, report.cluster(c.id), "warranty_claim")             # tags the members
"""

from __future__ import annotations

import hashlib
import re
from collections import Counter
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, Literal

import numpy as np
from pydantic import BaseModel, ConfigDict, Field

from ..distribution import pip_extra
from ..errors import MissingDependencyError, NotFoundError, ValidationError
from ..record.memir import MemIR

if TYPE_CHECKING:
    from .scope import Scope

__all__ = ["DiscoveredType", "DiscoveryParams", "Exemplar", "LabelFit", "TypeReport", "apply_type",
           "discover_types", "find_type"]

LabelKind = Literal["sub_role", "source_type", "tag"]

_STOP = frozenset("""the and for are but not you your yours our ours their they them this that these those with from
have has had was were will would could should can may might must its it's into onto over under about above after
before again then than there here what when where which who whom why how all any both each few more most other
some such only own same too very just also now per via out off let get got yet one two three is be been being do
does did done of to in on at by as an a or if so no i me my we he she his her him please thanks thank ok okay""".split())
_PLACEHOLDER = re.compile(r"\[[A-Z_]+\]")
_WORD = re.compile(r"[^\W\d_]{3,}")


class DiscoveryParams(BaseModel):
    """The parameters of one discovery run (``apply`` must re-run with the same ones to find an id).

    Attributes:
        min_cluster_size: HDBSCAN's smallest cluster (memories).
        min_samples: HDBSCAN's density parameter (None: ``min_cluster_size``).
        min_coverage: a cluster is described when a qualifying label covers at least this share of it.
        min_lift: a label qualifies when its share in the cluster is at least this many times its
            share in the whole scope.
        tier: which memories: ``working`` (default), ``archive`` or ``any``.
        max_memories: at most this many of the scope's most recent memories are clustered.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    min_cluster_size: int = Field(default=5, ge=2, le=100_000)
    min_samples: int | None = Field(default=None, ge=1, le=100_000)
    min_coverage: float = Field(default=0.6, gt=0.0, le=1.0)
    min_lift: float = Field(default=2.0, ge=1.0)
    tier: Literal["working", "archive", "any"] = "working"
    max_memories: int = Field(default=20_000, ge=2, le=1_000_000)


class LabelFit(BaseModel):
    """How one existing label fits a cluster."""

    kind: LabelKind
    value: str
    coverage: float = Field(description="share of the cluster's memories carrying the label")
    lift: float = Field(description="coverage / the label's share of the whole scope")


class Exemplar(BaseModel):
    """A member near the cluster's centre (content as stored: already redacted)."""

    id: str
    content: str
    similarity: float = Field(description="cosine similarity to the cluster's mean direction")


class DiscoveredType(BaseModel):
    """One cluster of the scope's memories."""

    id: str = Field(description="stable: a hash of the sorted member ids")
    size: int
    description_score: float = Field(description="best coverage among labels with lift >= min_lift (0: none)")
    described: bool = Field(description="description_score >= min_coverage")
    best_label: LabelFit | None = Field(description="the label behind the score")
    labels: list[LabelFit] = Field(description="the best-covering existing labels (up to 3), any lift")
    terms: list[str] = Field(description="words far more frequent in the cluster than outside it")
    exemplars: list[Exemplar]
    member_ids: list[str]


class TypeReport(BaseModel):
    """The result of :func:`discover_types` on one scope."""

    user_id: str
    agent_id: str
    params: DiscoveryParams
    n_memories: int = Field(description="memories clustered")
    n_clustered: int = Field(description="memories in some cluster (the rest is HDBSCAN noise)")
    clusters: list[DiscoveredType] = Field(description="largest first")

    @property
    def undescribed(self) -> list[DiscoveredType]:
        """Clusters no existing sub_role, source_type or tag describes (largest first)."""
        return [c for c in self.clusters if not c.described]

    def cluster(self, cluster_id: str) -> DiscoveredType:
        """The cluster with this id; ``NotFoundError`` otherwise."""
        for c in self.clusters:
            if c.id == cluster_id:
                return c
        raise NotFoundError(f"no cluster {cluster_id!r} in this discovery run of {self.user_id}/{self.agent_id} "
                            f"({len(self.clusters)} clusters) — the memories or the parameters changed since the id "
                            "was listed: discover again and use an id it lists")


def discover_types(scope: Scope, *, min_cluster_size: int = 5, min_samples: int | None = None,
                   min_coverage: float = 0.6, min_lift: float = 2.0,
                   tier: Literal["working", "archive", "any"] = "working", max_memories: int = 20_000,
                   n_exemplars: int = 3, n_terms: int = 6) -> TypeReport:
    """Cluster ``scope``'s memories by embedding and score how well existing labels describe each cluster.

    Reads only through the scope (``list_with_vectors``): never another user's memories. See the
    module docstring for the description score.

    Raises:
        MissingDependencyError: scikit-learn is not installed (``pip install 'memir-runtime[discovery]'``).
        ValidationError: a parameter is out of range (named).
    """
    params = _params(min_cluster_size=min_cluster_size, min_samples=min_samples, min_coverage=min_coverage,
                     min_lift=min_lift, tier=tier, max_memories=max_memories)
    hdbscan = _hdbscan()
    recs, vecs, _ = scope.list_with_vectors(tier=params.tier)
    if len(recs) > params.max_memories:  # the most recent ones (write order)
        recs, vecs = recs[-params.max_memories:], vecs[-params.max_memories:]
    report = TypeReport(user_id=scope.user_id, agent_id=scope.agent_id, params=params, n_memories=len(recs),
                        n_clustered=0, clusters=[])
    if len(recs) < max(params.min_cluster_size, 2):
        return report
    x = np.asarray(vecs, dtype=np.float64)
    x /= np.maximum(np.linalg.norm(x, axis=1, keepdims=True), 1e-12)
    ms = min(params.min_samples or params.min_cluster_size, len(recs) - 1)
    labels = hdbscan(min_cluster_size=params.min_cluster_size, min_samples=ms, metric="euclidean",
                     copy=True).fit_predict(x)  # unit vectors: euclidean ranks as cosine does
    scope_labels = [_labels_of(r) for r in recs]
    totals = Counter(lab for labs in scope_labels for lab in labs)
    words = [_words(r.content) for r in recs]
    word_totals = Counter(w for ws in words for w in ws)
    out = []
    for k in sorted(set(labels.tolist()) - {-1}):
        idx = np.flatnonzero(labels == k)
        out.append(_describe(idx, recs, x, scope_labels, totals, (words, word_totals), params, n_exemplars,
                             n_terms))
    out.sort(key=lambda c: (-c.size, c.id))
    return report.model_copy(update={"clusters": out, "n_clustered": int(np.sum(labels >= 0))})


def find_type(scope: Scope, cluster_id: str, **params: Any) -> DiscoveredType:
    """Re-run :func:`discover_types` with ``params`` and return the cluster ``cluster_id``
    (``NotFoundError`` if the run does not produce it: the memories or the parameters changed)."""
    return discover_types(scope, **params).cluster(cluster_id)


def apply_type(scope: Scope, cluster_or_ids: DiscoveredType | Sequence[str], tag: str) -> int:
    """Tag a discovered cluster's members (or the given memory ids) with ``tag``, retroactively, in
    one transaction (:meth:`Scope.tag`: ids outside the scope raise ``NotFoundError``, nothing
    changes). Returns how many memories gained the tag."""
    ids = cluster_or_ids.member_ids if isinstance(cluster_or_ids, DiscoveredType) else cluster_or_ids
    if isinstance(tag, str) and not tag.strip():
        raise ValidationError("tag must be a non-empty name (e.g. warranty_claim)", field="tag")
    return scope.tag(list(ids), [tag])


# ---------------------------------------------------------------------------------------------- internals

def _params(**kw: Any) -> DiscoveryParams:
    from pydantic import ValidationError as PydanticValidationError
    try:
        return DiscoveryParams(**kw)
    except PydanticValidationError as e:
        raise ValidationError.from_pydantic(e, what="discovery parameters") from None


def _hdbscan() -> Any:
    try:
        from sklearn.cluster import HDBSCAN
    except ImportError as e:
        raise MissingDependencyError("type discovery clusters with scikit-learn's HDBSCAN, which is not installed — "
                                     f"{pip_extra('discovery')}") from e
    return HDBSCAN


def _labels_of(r: MemIR) -> set[tuple[LabelKind, str]]:
    out: set[tuple[LabelKind, str]] = {("source_type", r.provenance.type.value)}
    if r.role_context.sub_role:
        out.add(("sub_role", r.role_context.sub_role))
    out.update(("tag", t) for t in r.metadata.tags)
    return out


def _words(text: str) -> set[str]:
    return {w for w in _WORD.findall(_PLACEHOLDER.sub(" ", text).lower()) if w not in _STOP}


def _describe(idx: np.ndarray, recs: list[MemIR], x: np.ndarray, scope_labels: list[set[tuple[LabelKind, str]]],
              totals: Counter[tuple[LabelKind, str]], words: tuple[list[set[str]], Counter[str]],
              params: DiscoveryParams,
              n_exemplars: int, n_terms: int) -> DiscoveredType:
    n, size = len(recs), len(idx)
    members = sorted(recs[i].id for i in idx)
    cid = "t_" + hashlib.sha256("\n".join(members).encode()).hexdigest()[:12]
    inside = Counter(lab for i in idx for lab in scope_labels[i])
    fits = [LabelFit(kind=kind, value=value, coverage=round(c / size, 4), lift=round((c / size) / (totals[(kind, value)] / n), 3))
            for (kind, value), c in inside.items()]
    fits.sort(key=lambda f: (-f.coverage, -f.lift, f.kind, f.value))
    qualifying = [f for f in fits if f.lift >= params.min_lift]
    best = max(qualifying, key=lambda f: (f.coverage, f.lift), default=None)
    score = best.coverage if best else 0.0
    centre = x[idx].mean(axis=0)
    centre /= max(float(np.linalg.norm(centre)), 1e-12)
    sims = x[idx] @ centre
    order = np.lexsort((np.array([recs[i].id for i in idx]), -sims))[:n_exemplars]
    exemplars = [Exemplar(id=recs[idx[j]].id, content=recs[idx[j]].content[:300], similarity=round(float(sims[j]), 4))
                 for j in order]
    return DiscoveredType(id=cid, size=size, description_score=score, described=score >= params.min_coverage,
                          best_label=best, labels=fits[:3], terms=_terms(idx, words, n_terms),
                          exemplars=exemplars, member_ids=members)


def _terms(idx: np.ndarray, words: tuple[list[set[str]], Counter[str]], n_terms: int) -> list[str]:
    """Words in at least a fifth of the cluster, ranked by (share inside − share outside)."""
    per_memory, total = words
    n, size = len(per_memory), len(idx)
    inside = Counter(w for i in idx for w in per_memory[i])
    rest = max(n - size, 1)
    ranked = sorted(((c / size - (total[w] - c) / rest, w) for w, c in inside.items() if c / size >= 0.2),
                    key=lambda t: (-t[0], t[1]))
    return [w for s, w in ranked[:n_terms] if s > 0]
