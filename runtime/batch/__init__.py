"""Batch scoring of memory dumps (``memir score``) through the one retention plan."""

from .score import ScoreConfig, score_dump

__all__ = ["ScoreConfig", "score_dump"]
