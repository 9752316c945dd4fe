"""LongMemEval: the streaming reader, the retention protocol on the production path, and training rows (MIT)."""
