"""Shared test support: fakes, fixtures' machinery and real servers, used by the tests of every tool
(import as `from support import NAME`; tests/conftest.py holds the pytest fixtures)."""
