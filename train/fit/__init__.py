"""The Lightning fit of the utility model: config, the LightningModule around the plain MLP, and the
data side (group split, sampler, DataModule, metrics)."""

from .lightning import FitConfig, FitResult, UtilityLitModule, run

__all__ = ["FitConfig", "FitResult", "UtilityLitModule", "run"]
