"""Locks: resolve a recipe through uv, write PEP 751, read every lock format, check integrity and freshness."""
