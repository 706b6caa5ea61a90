"""A secret in every form it can come back in, and text scrubbed of all of them.

A server that echoes a credential in an error body may echo it as it received it or
re-encoded: percent-encoded (a URL, a form), base64 (inside an `Authorization: Basic`
value, or a whole header or body base64'd), JSON-escaped, upper- or lower-cased.
`secret_forms` lists those forms; `scrub` replaces every one of them, in any letter
case, with `***`. Used for the sync token (sync/remote.py), the embedding key
(semantic/provider.py) and the Action's log masks (action/driver.py).
"""

from __future__ import annotations

import base64
import json
import re
from collections.abc import Iterable, Sequence
from urllib.parse import quote

#: The embedding provider's key (read by semantic/provider.py, masked by the Action).
EMBED_API_KEY_ENV = "CCE_EMBED_API_KEY"
#: Forms shorter than this are not scrubbed (they would blank common text).
MIN_FORM = 6


def _b64_cores(data: bytes) -> set[str]:
    """The base64 characters that stand for `data` alone, wherever it sits in a longer
    encoded string: for each of the three alignments, the sextets that hold only
    bits of `data` (standard and URL-safe alphabets)."""
    out: set[str] = set()
    n = len(data)
    for k in range(3):
        enc = base64.b64encode(b"\0" * k + data + b"\0\0").decode("ascii")
        first = -(-8 * k // 6)  # the first sextet that starts inside `data`
        last = (8 * (k + n)) // 6  # sextets before this one end inside `data`
        core = enc[first:last]
        out.update({core, core.replace("+", "-").replace("/", "_")})
    return out


def secret_forms(secret: str, basic_users: Iterable[str] = ()) -> list[str]:
    """`secret` as it may come back in an error, longest first: raw, upper- and
    lower-cased, percent-encoded, JSON-escaped, base64 on its own at any offset, and
    the base64 of each basic-auth `user:secret` pair (padded and unpadded)."""
    raw = secret.encode("utf-8")
    forms = {secret, secret.upper(), secret.lower(), quote(secret, safe=""), quote(secret)}
    forms.add(json.dumps(secret)[1:-1])
    forms.add(json.dumps(secret, ensure_ascii=False)[1:-1])
    forms.update(f.lower() for f in list(forms) if "%" in f)
    forms.update(_b64_cores(raw))
    for user in basic_users:
        b64 = base64.b64encode(f"{user}:{secret}".encode()).decode("ascii")
        forms.update({b64, b64.rstrip("=")})
    return sorted((f for f in forms if len(f) >= MIN_FORM), key=lambda f: (-len(f), f))


def scrub(text: str, forms: Sequence[str]) -> str:
    """`text` with every form in `forms` (any letter case) replaced by `***`."""
    forms = [f for f in forms if f]
    if not forms or not text:
        return text
    alternation = "|".join(re.escape(f) for f in sorted(set(forms), key=lambda f: (-len(f), f)))
    return re.sub(alternation, "***", text, flags=re.IGNORECASE)
