"""Labelled retention rows on disk: one Parquet file + a JSON manifest per round (:mod:`.rows`), with
the schema, hashing and value checks of a round (:mod:`.checks`)."""

from .rows import (
    MANIFEST_FILE,
    ROWS_FILE,
    SOURCES,
    RowBatch,
    decision_groups,
    load_rounds,
    load_spec,
    read_manifest,
    round_dir,
    to_numpy,
    write_round,
)

__all__ = ["MANIFEST_FILE", "ROWS_FILE", "SOURCES", "RowBatch", "decision_groups", "load_rounds", "load_spec",
           "read_manifest", "round_dir", "to_numpy", "write_round"]
