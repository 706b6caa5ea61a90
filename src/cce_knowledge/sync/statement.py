"""The publish statement: what a signature on a corpus snapshot vouches for.

    knowledge/v1/<corpus>/<snapshot>.statement.json        the statement
    knowledge/v1/<corpus>/<snapshot>.statement.json.sig    its SSHSIG (namespace cce-knowledge)

One line of canonical JSON (sorted keys, compact, UTF-8, one LF):

    {"cck":{"checksum":…,"sha256":…,"size":…},"corpus_id":…,"counter":…,
     "published_at":"YYYY-MM-DDTHH:MM:SSZ","schema":"cce.knowledgestatement/v1",
     "snapshot":…,"vectors":{"<key>":"<sha256>",…}}

`cck.sha256` hashes the artifact's file bytes, `cck.checksum` is its manifest checksum
(what the install marker records, so an installed store can be tied to its statement).
`counter` only goes up for a corpus: at least the publish time in seconds and more than
the previous statement's, so a consumer can refuse an older one (rollback). The
parser is strict and bounded: anything but the canonical bytes of a valid statement
is refused, so the bytes that were signed are exactly the meaning that is checked.

A valid statement's counter is also plausible: at most MAX_AHEAD seconds past its own
`published_at` (a counter is the publish time, or one more than the previous counter
when several publishes share a second), and `published_at` is a real UTC time. A counter
near 2^63 can therefore never be signed or accepted: one such statement would otherwise
become every consumer's rollback floor and refuse all later publishes (issue 34).
"""

from __future__ import annotations

import calendar
import json
import re
import time
from dataclasses import dataclass, field
from typing import Any

from cce_knowledge.core.errors import SyncError
from cce_knowledge.sync import keys as K

SCHEMA = "cce.knowledgestatement/v1"
MAX_BYTES = 64 * 1024
MAX_VECTORS = 64
MAX_COUNTER = 2**63 - 1
#: How far a counter may run ahead of its statement's publish time, and a publish time
#: ahead of the reader's clock (clock skew between a CI runner and a laptop), in seconds.
MAX_AHEAD = 86_400
_HEX64 = re.compile(r"[0-9a-f]{64}")
_TIME = re.compile(r"[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}Z")
_KEYS = {"cck", "corpus_id", "counter", "published_at", "schema", "snapshot", "vectors"}


def statement_key(corpus_id: str, snapshot: str) -> str:
    return f"{K.corpus_prefix(corpus_id)}/{snapshot}.statement.json"


def signature_key(corpus_id: str, snapshot: str) -> str:
    return statement_key(corpus_id, snapshot) + ".sig"


def is_statement_key(key: str) -> bool:
    return key.endswith(".statement.json") or key.endswith(".statement.json.sig")


def snapshot_of(key: str) -> str:
    """The snapshot a statement or signature key belongs to."""
    return key.rsplit("/", 1)[-1].split(".", 1)[0]


class StatementError(SyncError):
    """A statement that is not the canonical encoding of a valid statement."""


@dataclass(frozen=True)
class Statement:
    corpus_id: str
    snapshot: str
    cck_sha256: str
    cck_checksum: str
    cck_size: int
    published_at: str
    counter: int
    vectors: dict[str, str] = field(default_factory=dict)

    def to_obj(self) -> dict[str, Any]:
        return {
            "cck": {
                "checksum": self.cck_checksum,
                "sha256": self.cck_sha256,
                "size": self.cck_size,
            },
            "corpus_id": self.corpus_id,
            "counter": self.counter,
            "published_at": self.published_at,
            "schema": SCHEMA,
            "snapshot": self.snapshot,
            "vectors": dict(sorted(self.vectors.items())),
        }

    def to_bytes(self) -> bytes:
        text = json.dumps(self.to_obj(), sort_keys=True, separators=(",", ":"), ensure_ascii=False)
        return (text + "\n").encode("utf-8")


def _no_dupes(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for k, v in pairs:
        if k in out:
            raise ValueError(f"duplicate key {k!r}")
        out[k] = v
    return out


def _int(v: Any) -> bool:
    return isinstance(v, int) and not isinstance(v, bool) and 0 <= v <= MAX_COUNTER


def epoch_of(published_at: str) -> int:
    """`YYYY-MM-DDTHH:MM:SSZ` as Unix seconds; ValueError for an impossible date."""
    return calendar.timegm(time.strptime(published_at, "%Y-%m-%dT%H:%M:%SZ"))


def implausible(st: Statement) -> str | None:
    """Why the statement's counter or time cannot be a real publish's, else None."""
    try:
        published = epoch_of(st.published_at)
    except ValueError:
        return f"published_at {st.published_at} is not a real time"
    if st.counter > published + MAX_AHEAD:
        return (
            f"its counter {st.counter} is implausible: more than {MAX_AHEAD // 3600} hours past "
            f"its own publish time {st.published_at} (counters follow the publish clock)"
        )
    return None


def parse(data: bytes, where: str = "statement") -> Statement:
    """Strict: size-bounded, canonical bytes only, every field typed and checked."""
    if len(data) > MAX_BYTES:
        raise StatementError(f"{where}: larger than {MAX_BYTES} bytes: not a statement")
    try:
        obj = json.loads(data.decode("utf-8"), object_pairs_hook=_no_dupes)
    except (UnicodeDecodeError, ValueError, RecursionError) as e:
        raise StatementError(f"{where}: not a statement ({e})") from None
    if not isinstance(obj, dict) or set(obj) != _KEYS or obj.get("schema") != SCHEMA:
        raise StatementError(f"{where}: not a {SCHEMA} statement")
    cck, vectors = obj["cck"], obj["vectors"]
    ok = (
        isinstance(obj["corpus_id"], str)
        and K.valid_corpus_id(obj["corpus_id"])
        and isinstance(obj["snapshot"], str)
        and K.is_snapshot_id(obj["snapshot"])
        and _int(obj["counter"])
        and isinstance(obj["published_at"], str)
        and _TIME.fullmatch(obj["published_at"]) is not None
        and isinstance(cck, dict)
        and set(cck) == {"checksum", "sha256", "size"}
        and all(
            isinstance(cck[k], str) and _HEX64.fullmatch(cck[k]) for k in ("checksum", "sha256")
        )
        and _int(cck["size"])
        and isinstance(vectors, dict)
        and len(vectors) <= MAX_VECTORS
        and all(
            isinstance(v, str)
            and _HEX64.fullmatch(v)
            and k.endswith(".vec")
            and K.is_confined(k, obj["corpus_id"])
            for k, v in vectors.items()
        )
    )
    if not ok:
        raise StatementError(f"{where}: a field of the statement is missing or malformed")
    st = Statement(
        corpus_id=obj["corpus_id"],
        snapshot=obj["snapshot"],
        cck_sha256=cck["sha256"],
        cck_checksum=cck["checksum"],
        cck_size=cck["size"],
        published_at=obj["published_at"],
        counter=obj["counter"],
        vectors=dict(vectors),
    )
    if st.to_bytes() != data:
        raise StatementError(f"{where}: not in canonical form")
    why = implausible(st)
    if why is not None:
        raise StatementError(f"{where}: {why}")
    return st
