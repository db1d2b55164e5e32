"""The upstream ledger: every upstream commit after the fork point, its disposition and evidence."""
