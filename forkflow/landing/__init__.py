"""Picking landing units in memory and landing them on the fork branch by compare-and-swap."""
