"""LoCoMo-layout conversations: the validating reader, the protocol's definitions, the replay
through the production path, and labelled training rows (research presets only: CC BY-NC)."""
