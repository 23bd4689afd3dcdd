"""The bridge's version: its one home (pyproject.toml reads it from here)."""

__version__ = "0.2.0"
