"""The allowed values of settings that lower floors also need (the engine's redactor
choice): declared here, on the config floor, so the engine depends on config and never
the other way round."""

from __future__ import annotations

from typing import Literal

Redaction = Literal["extended", "reference"]
REDACTIONS: tuple[Redaction, ...] = ("extended", "reference")
DEFAULT_REDACTION: Redaction = "extended"
