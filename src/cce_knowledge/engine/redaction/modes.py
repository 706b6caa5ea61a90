"""Which redaction index applies, and redaction for display.

`extended` (the default) is the reference's rules plus more secret shapes
(extended_redactor.py); `reference` is the reference engine's redactor exactly
(redactor.py), for byte-exact stores. A feed in which the extended rules find nothing
gives the same bytes either way. Output meant for people or agents (record ids in
search, ask, MCP and doctor) always goes through the extended rules: display never
needs to be byte-exact.
"""

from __future__ import annotations

from collections.abc import Callable

from cce_knowledge.config.choices import DEFAULT_REDACTION, REDACTIONS, Redaction

__all__ = ["DEFAULT_REDACTION", "REDACTIONS", "Redaction", "redact_for_display", "redactor_for"]


def redactor_for(mode: Redaction) -> Callable[[str], str]:
    """The redaction function of `mode`."""
    if mode == "reference":
        # Only the chosen rule set is imported (the extended one compiles ~60 patterns).
        from cce_knowledge.engine.redaction.reference import redact

        return redact
    if mode == "extended":
        # As above: a reference-mode index never loads the extended rules.
        from cce_knowledge.engine.redaction.extended import redact_extended

        return redact_extended
    raise ValueError(f"unknown redaction {mode!r} (one of {', '.join(REDACTIONS)})")


def redact_for_display(text: str) -> str:
    """`text` fit to show: every rule, whatever the store was indexed with."""
    from cce_knowledge.engine.redaction.gate import may_redact  # literals only: cheap

    # Most shown texts (record ids) hold no needle of any rule: answering that from
    # literals spares a cold search loading and compiling every rule (redaction_gate).
    if not may_redact(text):
        return text
    from cce_knowledge.engine.redaction.extended import redact_extended  # see above

    return redact_extended(text)
