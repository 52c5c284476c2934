"""The engine's two errors, in a module of their own so that any floor of the engine can raise
them without importing the modules that catch them (the configuration, the runner)."""
from __future__ import annotations

__all__ = ["ConfigError", "RunError"]


class ConfigError(ValueError):
    """A fault in the configuration. ``where`` is ``file:line`` of the script statement that
    caused it, when known."""

    def __init__(self, message: str, where: str = "") -> None:
        super().__init__(message)
        self.where = where


class RunError(Exception):
    """A run failed: ``where`` is ``file[:line]`` of the fault, ``message`` says what it is."""

    def __init__(self, message: str, where: str = "") -> None:
        super().__init__(message)
        self.message = message
        self.where = where

    def __str__(self) -> str:
        return f"{self.where}: {self.message}" if self.where else self.message
