"""Could any secret rule change this text? A cheap answer before the full redactor loads.

Loading the extended redactor (extended_redactor.py) costs tens of milliseconds: its
rule file, the analysis of ~50 patterns for their prefilters and their compilation.
Search, ask and MCP show a few record ids per call, nearly always plain
(`rfc:0114`), so a cold `cce knowledge search` paid that for nothing. `may_redact`
answers from literals alone: every match of every rule (the reference's and the
extended ones) contains one of the needles below, or, for the two bot-token rules
that have no literal of two characters, matches the rule's precheck. When it says
False, neither redactor can change the text.

The needles are derived from the rules themselves (`extended_redactor.gate_needles`)
and written here so that deciding costs no regex parsing; tests/engine/
test_redaction_gate.py fails, printing the new tuples, whenever a rule changes and
they are stale.
"""

from __future__ import annotations

import re
from functools import cache

#: Literals, as the pattern spells them, one of which every match of a case-sensitive
#: rule contains.
EXACT_NEEDLES: tuple[str, ...] = (
    "-us",
    "/:_authToken=",
    "://",
    "A3T",
    "ABIA",
    "AC",
    "AIza",
    "AKC",
    "AKIA",
    "AP",
    "ASIA",
    "AccountKey=",
    "GR1348941",
    "PRIVATE KEY",
    "PuTTY-User-Key-File-2",
    "SG.",
    "SK",
    "T3BlbkFJ",
    "eyJ",
    "gho_",
    "ghp_",
    "ghr_",
    "ghs_",
    "ghu_",
    "github_pat_",
    "glagent-",
    "glcbt-",
    "gldt-",
    "glft-",
    "glimt-",
    "gloas-",
    "glpat-",
    "glptt-",
    "glrt-",
    "glsoat-",
    "pypi-AgEIcHlwaS5vcmc",
    "pypi-AgENdGVzdC5weXBpLm9yZw",
    "rk_live_",
    "rk_test_",
    "sk-",
    "sk_live_",
    "sk_test_",
    "sq0csp-",
    "xapp-",
    "xoxa-",
    "xoxb-",
    "xoxp-",
    "xoxr-",
    "xoxs-",
)
#: Lower-cased literals one of which every match of a case-insensitive rule contains
#: (and the key stems the reference's generic `key = value` pass needs), looked for in
#: `fold(text)`.
FOLDED_NEEDLES: tuple[str, ...] = (
    "access",
    "api",
    "auth",
    "aws",
    "cl",
    "com/soap/v3",
    "https://hooks.slack.com/services/t",
    "key",
    "pass",
    "private",
    "pwd",
    "secret",
    "token",
    "xoxa-",
    "xoxb-",
    "xoxo-",
    "xoxp-",
    "xoxr-",
    "xoxs-",
)
#: Rules with no literal prefilter -> (a regex every match of theirs also matches, the
#: length of their shortest match). A precheck starts with a literal, which `re` scans
#: for at C speed, where the rule itself is tried at every position of the text.
PRECHECKS: dict[str, tuple[str, int]] = {
    # Telegram: 8-10 digits, `:`, 35 token characters: a `:` with eight digits before it.
    r"\d{8,10}:[0-9A-Za-z_-]{35}": (r":(?<=\d{8}:)[0-9A-Za-z_-]{35}", 44),
    # Discord: [MNO] and 23-25 token characters (so 24 or more), `.`, 6, `.`, 27.
    r"[MNO][a-zA-Z\d_-]{23,25}\.[a-zA-Z\d_-]{6}\.[a-zA-Z\d_-]{27}": (
        r"\.(?<=[a-zA-Z\d_-]{24}\.)[a-zA-Z\d_-]{6}\.[a-zA-Z\d_-]{27}",
        59,
    ),
}


def fold(text: str) -> str:
    """`text` lower-cased so that every IGNORECASE match of a literal is a substring.

    re's IGNORECASE also matches İ and ı with i and ſ with s; str.lower() keeps ı and ſ
    and turns İ into two characters. Mapping those three first keeps offsets 1:1."""
    if "\u0130" in text:
        text = text.replace("\u0130", "i")
    low = text.lower()
    if "\u0131" in low or "\u017f" in low:
        low = low.replace("\u0131", "i").replace("\u017f", "s")
    return low


@cache
def precheck(pattern: str) -> re.Pattern[str] | None:
    """The compiled precheck of a rule pattern that has one."""
    pc = PRECHECKS.get(pattern)
    return None if pc is None else re.compile(pc[0])


def may_redact(text: str) -> bool:
    """False only when no redaction rule can match `text` (so redacting returns it as is)."""
    if any(n in text for n in EXACT_NEEDLES):
        return True
    low = fold(text)
    if any(n in low for n in FOLDED_NEEDLES):
        return True
    for pattern, (_, shortest) in PRECHECKS.items():
        if len(text) < shortest:
            continue  # (short ids: not even the precheck needs compiling)
        pc = precheck(pattern)
        if pc is not None and pc.search(text):
            return True
    return False
