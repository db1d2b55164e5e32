"""All of forkflow's git access.  `run.py` is the only place that starts git."""
