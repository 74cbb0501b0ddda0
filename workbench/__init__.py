"""Collective-communication algorithm synthesis workbench: one IR, one verifier, one simulator."""

__version__ = "0.3.0"
