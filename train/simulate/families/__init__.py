"""The family registry: every task family the simulator knows, by name."""

from __future__ import annotations

from .base import FamilySpec, RuleSpec, SlotSpec
from .business import CUSTOMER_SUPPORT, ONBOARDING, PROCUREMENT
from .personal import EVENT_PLANNING, HOUSEHOLD, TRAVEL
from .work import DOCUMENT_EDITING, PROJECT_MANAGEMENT, RESEARCH_ASSISTANT

__all__ = ["FAMILIES", "FAMILY_NAMES", "FamilySpec", "RuleSpec", "SlotSpec", "get_family"]

FAMILIES: dict[str, FamilySpec] = {f.name: f for f in (
    TRAVEL, DOCUMENT_EDITING, CUSTOMER_SUPPORT, PROJECT_MANAGEMENT, RESEARCH_ASSISTANT, HOUSEHOLD,
    PROCUREMENT, ONBOARDING, EVENT_PLANNING,
)}
FAMILY_NAMES: tuple[str, ...] = tuple(FAMILIES)


def get_family(family: str | FamilySpec) -> FamilySpec:
    """Resolve a family name (or pass a spec through).

    Raises:
        KeyError: unknown name; the message lists the valid ones.
    """
    if isinstance(family, FamilySpec):
        return family
    try:
        return FAMILIES[family]
    except KeyError:
        raise KeyError(f"unknown family {family!r}; valid: {list(FAMILY_NAMES)}") from None
