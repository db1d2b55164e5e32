"""All of forkflow's git access.  `run.py` is the only place that starts git; `pick.py` is the
in-memory picker over libgit2 (pygit2)."""
