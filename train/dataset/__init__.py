"""Labelled retention rows on disk: one Parquet file + a JSON manifest per round (:mod:`.rows`), with
the schema, hashing and value checks of a round (:mod:`.checks`)."""

from .groups import FitData, session_segments
from .round_files import (
    MANIFEST_FILE,
    ROWS_FILE,
    SOURCES,
    RowBatch,
    decision_groups,
    fit_data,
    load_rounds,
    load_spec,
    read_manifest,
    round_dir,
    to_numpy,
    write_round,
)

__all__ = ["MANIFEST_FILE", "ROWS_FILE", "SOURCES", "FitData", "RowBatch", "decision_groups", "fit_data",
           "load_rounds", "load_spec", "read_manifest", "round_dir", "session_segments", "to_numpy", "write_round"]
