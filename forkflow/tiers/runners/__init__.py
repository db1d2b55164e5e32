"""Runners: where suite jobs execute (a local process pool, or a Ray cluster)."""
