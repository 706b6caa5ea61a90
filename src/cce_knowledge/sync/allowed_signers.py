"""OpenSSH `allowed_signers` files (ssh-keygen(1), ALLOWED SIGNERS), as git's
`gpg.ssh.allowedSignersFile` uses them:

    principals [options] keytype base64-key [comment]

`principals` is a comma-separated list of identities (quoted when it holds spaces);
options are `namespaces="pattern-list"`, `valid-after="time"`, `valid-before="time"` and
`cert-authority` (a line that trusts certificates signed by its key, never the key
itself; cce signs with plain keys, so such lines match nothing here). A bad line is
an error naming the file and the line, so a typo never silently narrows or widens trust.
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
_TIME = re.compile(r"([0-9]{8})([0-9]{4}([0-9]{2})?)?(Z)?")


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


@dataclass(frozen=True)
class AllowedSigners:
    path: str
    signers: tuple[Signer, ...]

    def find(self, key: bytes, namespace: str, now: float | None = None) -> Signer | None:
        """The first line that lets `key` sign in `namespace` now, or None."""
        t = time.time() if now is None else now
        for s in self.signers:
            if s.key == key and s.allows(namespace, t):
                return s
        return None


def _pattern(p: str) -> re.Pattern[str]:
    out = "".join(".*" if c == "*" else "." if c == "?" else re.escape(c) for c in p)
    return re.compile(out, re.DOTALL)


def match_pattern_list(value: str, patterns: str) -> bool:
    """ssh_config(5) PATTERNS: comma-separated `*`/`?` globs, `!` negates (and wins)."""
    matched = False
    for raw in patterns.split(","):
        p = raw.strip()
        neg = p.startswith("!")
        if neg:
            p = p[1:]
        if p and _pattern(p).fullmatch(value):
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
        m = re.match(r'([A-Za-z-]+)(="((?:[^"\\]|\\.)*)")?(,|$)', text[i:])
        if m is None:
            raise SigningError(f"{where}: bad options {shown(text)!r}")
        name = m.group(1).lower()
        if name in out:
            raise SigningError(f"{where}: option {name} given twice")
        out[name] = m.group(3)
        i += m.end()
        if m.group(4) == "" and i < len(text):
            raise SigningError(f"{where}: bad options {shown(text)!r}")
    known = {"namespaces", "valid-after", "valid-before", "cert-authority"}
    for name, value in out.items():
        if name not in known:
            raise SigningError(f"{where}: unknown option {shown(name)!r}")
        if (name == "cert-authority") != (value is None):
            raise SigningError(
                f"{where}: option {name} " + ("takes no value" if value else "needs a value")
            )
    return out


def parse_line(line: str, where: str) -> Signer | None:
    text = line.strip()
    if not text or text.startswith("#"):
        return None
    principals, pos = _field(text, 0, where)
    principals = principals.strip('"')
    if not principals:
        raise SigningError(f"{where}: no principals")
    nxt, pos2 = _field(text, pos, where)
    opts: dict[str, str | None] = {}
    if nxt not in _KEY_TYPES:
        opts = _options(nxt, where)
        nxt, pos2 = _field(text, pos2, where)
    va, vb = opts.get("valid-after"), opts.get("valid-before")
    after = _parse_time(va, where) if va is not None else None
    before = _parse_time(vb, where) if vb is not None else None
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
    signers = []
    for n, line in enumerate(text.split("\n"), 1):
        s = parse_line(line, f"{path}:{n}")
        if s is not None:
            signers.append(Signer(**{**s.__dict__, "line": n}))
    return AllowedSigners(path, tuple(signers))


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
