"""Online A/B experiments (seed 000 §5.3.3): arms over recall settings and retention policies,
declared in ``StoreConfig.experiments``; a deterministic, sticky assignment of users to arms;
typed outcome events recorded through ``Scope.feedback``; and the report behind
``memir ab report`` (per-arm metrics, bootstrap intervals, the size needed, a verdict).

Names resolve at first use (PEP 562): a store that declares experiments does not load the report."""

from typing import TYPE_CHECKING

from ..lazy import lazy_names

_EXPORTS = {
    **dict.fromkeys(("METRICS", "RECALL_SETTINGS", "Arm", "Experiment", "Metric", "check_experiments"), ".design"),
    **dict.fromkeys(("FEEDBACK_KINDS", "Feedback", "FeedbackKind"), ".events"),
    **dict.fromkeys(("ArmResult", "Comparison", "ExperimentReport", "compare_arms", "needed_per_arm", "user_values"),
                    ".report"),
}

if TYPE_CHECKING:
    from .design import METRICS, RECALL_SETTINGS, Arm, Experiment, Metric, check_experiments
    from .events import FEEDBACK_KINDS, Feedback, FeedbackKind
    from .report import ArmResult, Comparison, ExperimentReport, compare_arms, needed_per_arm, user_values

__getattr__, __dir__ = lazy_names(__name__, _EXPORTS, globals())

__all__ = ["FEEDBACK_KINDS", "METRICS", "RECALL_SETTINGS", "Arm", "ArmResult", "Comparison", "Experiment",
           "ExperimentReport", "Feedback", "FeedbackKind", "Metric", "check_experiments", "compare_arms",
           "needed_per_arm", "user_values"]
