"""PostgreSQL databases for the collector replica and outage tests (see tests/databases.py)."""

from tests.support.databases import postgres_session_url, postgres_url

__all__ = ["postgres_session_url", "postgres_url"]
