"""Persistence.  SQLAlchemy classes stay here; queries return forkflow.models values."""
