"""OpenSSH `allowed_signers` files (ssh-keygen(1), ALLOWED SIGNERS), as git's
`gpg.ssh.allowedSignersFile` uses them:

    principals [options] keytype base64-key [comment]

`principals` is a comma-separated list of identity patterns (quoted when it holds
spaces); options are `namespaces="pattern-list"`, `valid-after="time"`,
`valid-before="time"` and `cert-authority` (a line that trusts certificates signed by
its key, never the key itself; cce signs with plain keys, so such lines match nothing
here). A malformed line is an error naming the file and the line, so a typo never
silently narrows or widens trust. A well-formed line for a key type cce does not
verify (security keys, certificates, DSA) is skipped with a warning naming FILE:LINE,
as ssh-keygen would simply never match it for a cce signature.

Principals are bound as `ssh-keygen -Y verify -I IDENTITY` binds them: a signature
counts for a corpus only when a principal pattern of the key's line matches the corpus
id (docs/security.md, "Which key may publish which corpus").

Patterns are matched as OpenSSH's match_pattern does (`*`, `?`), in time linear in the
pattern: the file is untrusted-ish input (a shared, committed file) and must never
take exponential time.
"""

from __future__ import annotations

import base64
import binascii
import calendar
import os
import re
import time
from dataclasses import dataclass
from pathlib import Path

from cce_knowledge.core.untrusted import shown
from cce_knowledge.sync.sshsig import (
    SigningError,
    describe,
    key_type,
    public_from_blob,
    read_capped,
)

MAX_FILE_BYTES = 4 * 1024 * 1024
_KEY_TYPES = (
    "ssh-ed25519",
    "ssh-rsa",
    "ecdsa-sha2-nistp256",
    "ecdsa-sha2-nistp384",
    "ecdsa-sha2-nistp521",
)
#: Key types OpenSSH lists in allowed_signers that cce never verifies: a line for one is
#: skipped with a warning (it can never match a cce signature), not an error.
_SKIPPED_TYPES = (
    "sk-ssh-ed25519@openssh.com",
    "sk-ecdsa-sha2-nistp256@openssh.com",
    "ssh-dss",
    "ssh-xmss@openssh.com",
)
_CERT_SUFFIX = "-cert-v01@openssh.com"
_TIME = re.compile(r"([0-9]{8})([0-9]{4}([0-9]{2})?)?(Z)?")
_OPTION = re.compile(r'([A-Za-z-]+)(="((?:[^"\\]|\\.)*)")?(,|$)')
_KNOWN_OPTIONS = ("namespaces", "valid-after", "valid-before", "cert-authority")


def _skipped_type(kt: str) -> bool:
    return kt in _SKIPPED_TYPES or kt.endswith(_CERT_SUFFIX)


@dataclass(frozen=True)
class Signer:
    principals: str
    key: bytes
    namespaces: str | None = None
    valid_after: float | None = None
    valid_before: float | None = None
    cert_authority: bool = False
    line: int = 0

    def allows(self, namespace: str, now: float) -> bool:
        if self.cert_authority:
            return False
        if self.namespaces is not None and not match_pattern_list(namespace, self.namespaces):
            return False
        if self.valid_after is not None and now < self.valid_after:
            return False
        return not (self.valid_before is not None and now > self.valid_before)

    def names(self, principal: str) -> bool:
        """Whether one of the line's principal patterns matches `principal` (as
        `ssh-keygen -Y verify -I principal` decides)."""
        return match_pattern_list(principal, self.principals)


@dataclass(frozen=True)
class AllowedSigners:
    path: str
    signers: tuple[Signer, ...]
    #: one warning per line skipped (a key type cce does not verify), naming FILE:LINE
    skipped: tuple[str, ...] = ()

    def find(
        self, key: bytes, namespace: str, now: float | None = None, principal: str | None = None
    ) -> Signer | None:
        """The first line that lets `key` sign in `namespace` now — for `principal` (a
        corpus id) when given: one of the line's principal patterns must match it."""
        t = time.time() if now is None else now
        for s in self.signers:
            if (
                s.key == key
                and s.allows(namespace, t)
                and (principal is None or s.names(principal))
            ):
                return s
        return None


def match_pattern(value: str, pattern: str) -> bool:
    """OpenSSH's match_pattern: `*` any run, `?` any one character, the rest literal.

    Linear in the pattern: a pattern with more literal characters than `value` has
    cannot match (each consumes one), so only a pattern of at most about 2×len(value)
    characters (runs of `*` collapsed) reaches the matcher, whose single backtrack
    point (the last `*`) bounds it by len(value)×len(pattern)."""
    literal = len(pattern) - pattern.count("*")
    if literal > len(value):
        return False
    p = re.sub(r"\*+", "*", pattern)
    i = j = 0
    star, mark = -1, 0
    while i < len(value):
        if j < len(p) and p[j] != "*" and (p[j] == "?" or p[j] == value[i]):
            i += 1
            j += 1
        elif j < len(p) and p[j] == "*":
            star, mark = j, i
            j += 1
        elif star >= 0:
            # Let the last `*` take one more character and retry the rest after it.
            mark += 1
            i, j = mark, star + 1
        else:
            return False
    return all(c == "*" for c in p[j:])


def match_pattern_list(value: str, patterns: str) -> bool:
    """ssh_config(5) PATTERNS: comma-separated `*`/`?` globs, `!` negates (and wins)."""
    matched = False
    for raw in patterns.split(","):
        p = raw.strip()
        neg = p.startswith("!")
        if neg:
            p = p[1:]
        if p and match_pattern(value, p):
            if neg:
                return False
            matched = True
    return matched


def _parse_time(text: str, where: str) -> float:
    m = _TIME.fullmatch(text)
    if m is None:
        raise SigningError(f"{where}: bad time {shown(text)!r} (YYYYMMDD[HHMM[SS]][Z])")
    digits = m.group(1) + (m.group(2) or "0000")
    digits = digits if len(digits) == 14 else digits + "00"
    try:
        st = time.strptime(digits, "%Y%m%d%H%M%S")
    except ValueError:
        raise SigningError(f"{where}: bad time {shown(text)!r}") from None
    # As ssh-keygen: a trailing Z means UTC, otherwise the local time zone.
    return float(calendar.timegm(st) if m.group(4) else time.mktime(st))


def _field(line: str, pos: int, where: str) -> tuple[str, int]:
    """One whitespace-separated field from `pos`; a `"…"` part may hold spaces."""
    while pos < len(line) and line[pos] in " \t":
        pos += 1
    start, quoted = pos, False
    while pos < len(line) and (quoted or line[pos] not in " \t"):
        if line[pos] == '"':
            quoted = not quoted
        pos += 1
    if quoted:
        raise SigningError(f"{where}: unterminated quote")
    return line[start:pos], pos


def _options(text: str, where: str) -> dict[str, str | None]:
    out: dict[str, str | None] = {}
    i = 0
    while i < len(text):
        # Matched in place (no slice of the rest per option: that was quadratic).
        m = _OPTION.match(text, i)
        if m is None:
            raise SigningError(f"{where}: bad options {shown(text)!r}")
        name = m.group(1).lower()
        if name in out:
            raise SigningError(f"{where}: option {name} given twice")
        if name not in _KNOWN_OPTIONS:
            raise SigningError(f"{where}: unknown option {shown(name)!r}")
        out[name] = m.group(3)
        i = m.end()
        if m.group(4) == "" and i < len(text):
            raise SigningError(f"{where}: bad options {shown(text)!r}")
    for name, value in out.items():
        if (name == "cert-authority") != (value is None):
            raise SigningError(
                f"{where}: option {name} " + ("takes no value" if value else "needs a value")
            )
    return out


class _Skipped(Exception):
    """A well-formed line for a key type cce does not verify."""


def parse_line(line: str, where: str) -> Signer | None:
    """One line: a Signer, None for a blank or comment line. A line for a key type cce
    does not verify raises _Skipped (parse() turns it into a warning)."""
    text = line.strip()
    if not text or text.startswith("#"):
        return None
    principals, pos = _field(text, 0, where)
    principals = principals.strip('"')
    if not principals:
        raise SigningError(f"{where}: no principals")
    nxt, pos2 = _field(text, pos, where)
    opts: dict[str, str | None] = {}
    if nxt not in _KEY_TYPES and not _skipped_type(nxt):
        opts = _options(nxt, where)
        nxt, pos2 = _field(text, pos2, where)
    va, vb = opts.get("valid-after"), opts.get("valid-before")
    after = _parse_time(va, where) if va is not None else None
    before = _parse_time(vb, where) if vb is not None else None
    if _skipped_type(nxt):
        raise _Skipped(
            f"{where}: skipped: cce does not verify {shown(nxt)} keys (it verifies "
            f"{', '.join(_KEY_TYPES)}); this line can never accept a cce-knowledge signature"
        )
    if nxt not in _KEY_TYPES:
        raise SigningError(
            f"{where}: expected a key type ({', '.join(_KEY_TYPES)}), found {shown(nxt)!r}"
        )
    b64, _ = _field(text, pos2, where)
    if not b64:
        raise SigningError(f"{where}: the {nxt} public key (base64) is missing")
    try:
        blob = base64.b64decode(b64, validate=True)
    except (binascii.Error, ValueError):
        raise SigningError(f"{where}: bad base64 public key") from None
    if key_type(blob) != nxt:
        raise SigningError(f"{where}: the key is not a {nxt} key")
    try:
        public_from_blob(blob)
    except SigningError as e:
        raise SigningError(f"{where}: {e.message}") from None
    return Signer(
        principals=principals,
        key=blob,
        namespaces=opts.get("namespaces"),
        valid_after=after,
        valid_before=before,
        cert_authority="cert-authority" in opts,
    )


def parse(text: str, path: str) -> AllowedSigners:
    signers, skipped = [], []
    for n, line in enumerate(text.split("\n"), 1):
        try:
            s = parse_line(line, f"{path}:{n}")
        except _Skipped as e:
            skipped.append(str(e))
            continue
        if s is not None:
            signers.append(Signer(**{**s.__dict__, "line": n}))
    return AllowedSigners(path, tuple(signers), tuple(skipped))


def load(path: str | os.PathLike[str]) -> AllowedSigners:
    """Read and parse an allowed_signers file; errors name the file (and the line)."""
    p = Path(path)
    data = read_capped(p, MAX_FILE_BYTES, "allowed signers file", SigningError)
    if len(data) > MAX_FILE_BYTES:
        raise SigningError(f"{p}: larger than {MAX_FILE_BYTES} bytes: not an allowed_signers file")
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as e:
        raise SigningError(f"{p}: not UTF-8 ({e})") from None
    return parse(text, str(p))


def signer_text(s: Signer) -> str:
    return f"{s.principals} ({describe(s.key)})"
