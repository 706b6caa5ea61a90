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

__all__ = [
    "DEFAULT_REDACTION",
    "DISPLAY_MAX",
    "REDACTIONS",
    "Redaction",
    "redact_for_display",
    "redactor_for",
]


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


#: Display shows at most this many characters of a text (a record id has no length
#: limit in the contract: a pulled corpus may hold one of megabytes)...
DISPLAY_MAX = 512
#: ...and redaction reads at most this many: a secret that straddles the cut is
#: redacted whole before the cut is made, not left as a prefix too short to match.
DISPLAY_SCAN = 4 * DISPLAY_MAX


def redact_for_display(text: str) -> str:
    """`text` fit to show: every rule, whatever the store was indexed with; a text
    longer than DISPLAY_MAX is cut there, with how much was left out."""
    if len(text) > DISPLAY_MAX:
        shown = _redacted(text[:DISPLAY_SCAN])
        cut = DISPLAY_MAX
        token = shown.rfind("[REDACTED:", 0, cut)
        if token >= 0 and shown.find("]", token) >= cut:
            cut = token  # not halfway through a redaction token
        return f"{shown[:cut]}…[cut: {len(text)} characters in all]"
    return _redacted(text)


def _redacted(text: str) -> str:
    from cce_knowledge.engine.redaction.gate import may_redact  # literals only: cheap

    # Most shown texts (record ids) hold no needle of any rule: answering that from
    # literals spares a cold search loading and compiling every rule (redaction_gate).
    if not may_redact(text):
        return text
    from cce_knowledge.engine.redaction.extended import redact_extended  # see above

    return redact_extended(text)
