"""Conflicts of in-memory picks: classification, resolvers behind guardrails, records for people."""
