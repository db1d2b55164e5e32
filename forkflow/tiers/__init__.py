"""Hierarchical validation: L1/L2/L3 suites, runners, selection, saturation checks, L3 sign-off."""
