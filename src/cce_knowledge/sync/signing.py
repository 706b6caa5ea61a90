"""Signed corpora: push signs a statement, pull verifies who published it.

Trust model (docs/security.md): with allowed signers configured, a snapshot is
installed only when its statement (statement.py) is signed by a key the
allowed_signers file lets sign in the `cce-knowledge` namespace, names the corpus and
snapshot asked for, hashes to the artifact's bytes, and is not older than the newest
statement this root has already accepted for the corpus (rollback). Without allowed
signers nothing is checked, as before; a signature found is recorded and shown, marked
not verified.

The signing key arrives as a path (`--sign-key`, `knowledge.sync.signing_key`) or as
key text in CCE_SIGNING_KEY (a CI secret). It is only ever held in memory: the
signature is made in process, so the key is never written, never passed in argv and
never quoted in an error.

Local files under `.cce/knowledge/` (none of them is read by the reference engine):
`statement.json` + `statement.json.sig`, the installed snapshot's statement as
published (replaced on every pull, removed when the pulled snapshot is unsigned), and
`trusted-statements.json`, per corpus the newest statement accepted under allowed
signers: the rollback floor; `statement.verified.json`, who verified the installed
statement at pull time (principals, key, when, which allowed_signers file), so `status`
can say so without allowed signers configured.

Counters (issue 34): push takes the previous counter only from a statement whose
signature it verifies (its own key, or a key allowed for the corpus), never signs a
statement its own parser would refuse, and both sides refuse an implausible counter
(statement.implausible) or a publish time more than a day ahead of the clock. A
consumer whose floor is unusable recovers with `cce knowledge pull --reset-trust`.
"""

from __future__ import annotations

import hashlib
import json
import os
import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from cce_knowledge.core.atomic import atomic_write
from cce_knowledge.core.errors import CceError, SyncError, UsageError
from cce_knowledge.core.untrusted import read_regular, shown
from cce_knowledge.store.snapshots import knowledge_dir
from cce_knowledge.sync import allowed_signers as AS
from cce_knowledge.sync import sshsig
from cce_knowledge.sync.sshsig import SigningError
from cce_knowledge.sync.statement import MAX_AHEAD, Statement, StatementError, epoch_of
from cce_knowledge.sync.statement import parse as parse_statement

KEY_ENV = "CCE_SIGNING_KEY"
STATEMENT_FILE = "statement.json"
SIGNATURE_FILE = "statement.json.sig"
FLOOR_FILE = "trusted-statements.json"
FLOOR_SCHEMA = "cce.trustedstatements/v1"
VERIFIED_FILE = "statement.verified.json"
VERIFIED_SCHEMA = "cce.verifiedstatement/v1"


class SignatureRefused(SyncError):
    """Pull or verify refused a snapshot under allowed signers (exit 1)."""


# ------------------------------------------------------------------ paths and keys


def resolve_path(root: str | os.PathLike[str], value: str) -> Path:
    """A configured path: `~` expanded, relative to the project root."""
    p = Path(os.path.expanduser(value))
    return p if p.is_absolute() else Path(root) / p


@dataclass(frozen=True)
class SigningKey:
    key: sshsig.PrivateKey
    #: where the key came from (a path or the variable's name), never the key
    source: str

    @property
    def public(self) -> bytes:
        return sshsig.public_blob(self.key.public_key())

    @property
    def signer(self) -> str:
        return sshsig.describe(self.public)


def load_signing_key(
    root: str | os.PathLike[str],
    path: str | None,
    configured: str | None,
    env: Mapping[str, str] | None = None,
) -> SigningKey | None:
    """`--sign-key PATH`, else CCE_SIGNING_KEY (key text), else knowledge.sync.signing_key.
    None when none is set. Raises SigningKeyError naming the source, never the key."""
    env = os.environ if env is None else env
    if path:
        p = Path(os.path.expanduser(path))
        return SigningKey(sshsig.load_private_key_file(p), str(p))
    text = env.get(KEY_ENV, "")
    if text.strip():
        data = text.encode("utf-8", "replace")
        return SigningKey(sshsig.load_private_key(data, KEY_ENV), KEY_ENV)
    if configured:
        p = resolve_path(root, configured)
        key = sshsig.load_private_key_file(p)
        return SigningKey(key, f"{p} (knowledge.sync.signing_key)")
    return None


def load_allowed(
    root: str | os.PathLike[str], path: str | None, configured: str | None
) -> AS.AllowedSigners | None:
    """`--allowed-signers FILE`, else knowledge.sync.allowed_signers; None when neither."""
    if path:
        return AS.load(Path(os.path.expanduser(path)))
    if configured:
        return AS.load(resolve_path(root, configured))
    return None


# ------------------------------------------------------------------ push side


def next_counter(previous: int | None, now: float | None = None) -> int:
    """More than the previous statement's, and at least the time in seconds: a lost or
    unreadable previous statement still cannot make the counter go back."""
    t = int(time.time() if now is None else now)
    return max(t, (previous or 0) + 1)


def previous_counter(
    statement: bytes | None,
    signature: bytes | None,
    *,
    key: SigningKey,
    allowed: AS.AllowedSigners | None,
    corpus_id: str,
    where: str,
    now: float | None = None,
) -> tuple[int | None, str | None]:
    """(counter, None) from the remote's current statement when its signature verifies
    — by this signing key, or by a key `allowed` lets publish `corpus_id` — and it is
    plausible; else (None, why it was ignored). Anyone who can write to the cache can
    edit a statement, so an unverified counter must never steer the next one."""
    if statement is None:
        return None, None
    try:
        if signature is None:
            raise SigningError("it has no signature")
        sig = sshsig.parse_signature(signature, where + ".sig")
        ours = sig.public_key == key.public
        if not ours and (
            allowed is None
            or allowed.find(sig.public_key, sshsig.NAMESPACE, principal=corpus_id) is None
        ):
            raise SigningError(
                f"it is signed by {sig.signer}, neither this signing key nor an allowed signer "
                f"of `{corpus_id}`"
            )
        sshsig.check_signature(sig, statement)
        st = parse_statement(statement, where)
        if st.corpus_id != corpus_id:
            raise SigningError(f"it is for corpus `{st.corpus_id}`")
        check_plausible(st, where, now)
    except CceError as e:
        return None, f"ignored the remote's current statement for the counter: {e.message}"
    return st.counter, None


def new_statement(
    *,
    corpus_id: str,
    snapshot: str,
    cck_sha256: str,
    cck_checksum: str,
    cck_size: int,
    published_at: str,
    previous: int | None,
    vectors: dict[str, str],
) -> Statement:
    """The statement to sign: counter at least the publish time and more than
    `previous`. Raises SigningError rather than sign what pull would refuse."""
    st = Statement(
        corpus_id=corpus_id,
        snapshot=snapshot,
        cck_sha256=cck_sha256,
        cck_checksum=cck_checksum,
        cck_size=cck_size,
        published_at=published_at,
        counter=next_counter(previous, epoch_of(published_at)),
        vectors=vectors,
    )
    try:
        parse_statement(st.to_bytes(), "the statement to sign")
    except StatementError as e:
        raise SigningError(
            f"refusing to sign: {e.message} — the previous verified counter is {previous}; "
            "check this machine's clock"
        ) from None
    return st


def sign_statement(key: SigningKey, st: Statement) -> tuple[bytes, bytes]:
    data = st.to_bytes()
    return data, sshsig.sign(key.key, data)


def sha256_of(data: Any) -> str:
    """SHA-256 of bytes or a read-only buffer (a memory-mapped artifact)."""
    return hashlib.sha256(data).hexdigest()


# ------------------------------------------------------------------ verification


@dataclass(frozen=True)
class Verified:
    statement: Statement
    #: the allowed_signers principals of the key that signed
    principals: str
    key: str
    #: the allowed_signers file it was verified against
    allowed_signers: str = ""

    @property
    def signer(self) -> str:
        return f"{self.principals} ({self.key})"


def check_plausible(st: Statement, where: str, now: float | None = None) -> None:
    """Refuse a statement published more than MAX_AHEAD seconds after `now` (the
    parser already refused a counter far past its own publish time)."""
    t = time.time() if now is None else now
    if epoch_of(st.published_at) > t + MAX_AHEAD:
        raise SignatureRefused(
            f"{where}: refusing the snapshot: its statement is implausible: published at "
            f"{st.published_at}, more than {MAX_AHEAD // 3600} hours ahead of this machine's clock"
        )


def check_signed(
    allowed: AS.AllowedSigners,
    statement: bytes | None,
    signature: bytes | None,
    where: str,
    corpus_id: str | None = None,
) -> tuple[Statement, AS.Signer, sshsig.SshSig]:
    """The statement, once its signature by a key allowed to publish `corpus_id`
    verified. Raises SignatureRefused naming the reason."""
    if statement is None or signature is None:
        missing = "statement" if statement is None else "signature"
        raise SignatureRefused(
            f"{where}: refusing an unsigned snapshot (no {missing} on the cache) — allowed "
            f"signers are configured ({allowed.path}), so only a snapshot signed by one of them "
            "is installed"
        )
    try:
        sig = sshsig.parse_signature(signature, f"{where}.sig")
    except sshsig.SigningError as e:
        raise SignatureRefused(f"refusing the snapshot: {e.message}") from None
    if sig.namespace != sshsig.NAMESPACE:
        raise SignatureRefused(
            f"{where}: refusing the snapshot: signed for namespace `{shown(sig.namespace)}`, "
            f"not `{sshsig.NAMESPACE}`"
        )
    signer = allowed.find(sig.public_key, sshsig.NAMESPACE, principal=corpus_id)
    if signer is None and corpus_id is not None:
        other = allowed.find(sig.public_key, sshsig.NAMESPACE)
        if other is not None:
            raise SignatureRefused(
                f"{where}: refusing the snapshot: it is signed by {sig.signer}, which "
                f"{allowed.path}:{other.line} lists for `{shown(other.principals)}`, not for "
                f"corpus `{corpus_id}`: a line's principals name the corpora its key may "
                f"publish (patterns such as `{corpus_id}`, `team-*` or `*`; docs/security.md)"
            )
    if signer is None:
        listed = any(s.key == sig.public_key for s in allowed.signers)
        why = (
            f"is listed in {allowed.path} but not allowed to sign in namespace "
            f"`{sshsig.NAMESPACE}` now (namespaces=, valid-after/valid-before, or cert-authority)"
            if listed
            else f"is not in {allowed.path}"
        )
        raise SignatureRefused(
            f"{where}: refusing the snapshot: it is signed by {sig.signer}, which {why}"
        )
    try:
        sshsig.check_signature(sig, statement)
    except sshsig.SigningError as e:
        raise SignatureRefused(f"{where}: refusing the snapshot: {e.message}") from None
    try:
        st = parse_statement(statement, where)
    except StatementError as e:
        raise SignatureRefused(f"refusing the snapshot: {e.message}") from None
    return st, signer, sig


def verify_publish(
    allowed: AS.AllowedSigners,
    statement: bytes | None,
    signature: bytes | None,
    *,
    where: str,
    corpus_id: str,
    snapshot: str,
    artifact_sha256: str,
    floor: Statement | None,
) -> Verified:
    """Everything pull checks before it installs a snapshot under allowed signers."""
    st, signer, sig = check_signed(allowed, statement, signature, where, corpus_id)
    check_plausible(st, where)
    if st.corpus_id != corpus_id or st.snapshot != snapshot:
        raise SignatureRefused(
            f"{where}: refusing the snapshot: the signed statement is for "
            f"{st.corpus_id}@{st.snapshot}, not {corpus_id}@{snapshot}"
        )
    if st.cck_sha256 != artifact_sha256:
        raise SignatureRefused(
            f"{where}: refusing the snapshot: the statement does not match the artifact "
            f"(signed sha256 {st.cck_sha256}, artifact sha256 {artifact_sha256})"
        )
    check_rollback(st, floor, where)
    return Verified(st, signer.principals, sig.signer, allowed.path)


def check_rollback(st: Statement, floor: Statement | None, where: str) -> None:
    if floor is None or floor.corpus_id != st.corpus_id:
        return
    same = (floor.snapshot, floor.cck_sha256) == (st.snapshot, st.cck_sha256)
    if st.counter < floor.counter or (st.counter == floor.counter and not same):
        raise SignatureRefused(
            f"{where}: refusing a rollback: the statement for {st.corpus_id}@{st.snapshot} "
            f"(counter {st.counter}, published {st.published_at}) is not newer than the one "
            f"already accepted here ({floor.snapshot}, counter {floor.counter}, published "
            f"{floor.published_at}). An older snapshot is never installed over a newer one "
            f"under allowed signers; see docs/security.md to reset on purpose."
        )


# ------------------------------------------------------------------ local records


def _paths(root: str | os.PathLike[str]) -> tuple[Path, Path, Path]:
    d = knowledge_dir(root)
    return d / STATEMENT_FILE, d / SIGNATURE_FILE, d / FLOOR_FILE


def record_installed(
    root: str | os.PathLike[str],
    statement: bytes | None,
    signature: bytes | None,
    verified: Verified | None = None,
) -> None:
    """The installed snapshot's statement as published, or none (an unsigned snapshot),
    and who verified it at pull time (none: not verified). Raises OSError."""
    st_path, sig_path, _ = _paths(root)
    vpath = knowledge_dir(root) / VERIFIED_FILE
    vpath.unlink(missing_ok=True)  # first: a stale record never describes new bytes
    if statement is None or signature is None:
        for p in (st_path, sig_path):
            p.unlink(missing_ok=True)
        return
    atomic_write(sig_path, signature)
    atomic_write(st_path, statement)
    if verified is not None:
        body = {
            "allowed_signers": verified.allowed_signers,
            "principals": verified.principals,
            "schema": VERIFIED_SCHEMA,
            "signer": verified.key,
            "statement_sha256": sha256_of(statement),
            "verified_at": _utc(time.time()),
        }
        atomic_write(vpath, (json.dumps(body, indent=2, sort_keys=True) + "\n").encode())


def _utc(t: float) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(t))


def read_verified(root: str | os.PathLike[str], statement: bytes) -> dict[str, str] | None:
    """The pull-time verification record of exactly `statement`, else None."""
    try:
        obj = json.loads(_read_bounded(knowledge_dir(root) / VERIFIED_FILE, 64 * 1024))
    except (OSError, ValueError):
        return None
    keys = ("allowed_signers", "principals", "signer", "statement_sha256", "verified_at")
    if (
        not isinstance(obj, dict)
        or obj.get("schema") != VERIFIED_SCHEMA
        or not all(isinstance(obj.get(k), str) for k in keys)
        or obj["statement_sha256"] != sha256_of(statement)
    ):
        return None
    return {k: obj[k] for k in keys}


def read_installed(root: str | os.PathLike[str]) -> tuple[bytes, bytes] | None:
    st_path, sig_path, _ = _paths(root)
    try:
        st = _read_bounded(st_path, 64 * 1024)
        sig = _read_bounded(sig_path, sshsig.MAX_SIG_BYTES)
    except OSError:
        return None
    return st, sig


def _read_bounded(path: Path, limit: int) -> bytes:
    if path.stat().st_size > limit:
        raise OSError(f"{path}: larger than {limit} bytes")
    return read_regular(path)


def reset_hint(corpus_id: str) -> str:
    return (
        "if you trust the key that signs the cache's current snapshot, accept it as the new "
        f"floor with `cce knowledge pull --corpus {corpus_id} --reset-trust` (docs/security.md)"
    )


def read_floor(root: str | os.PathLike[str], corpus_id: str) -> Statement | None:
    """The newest statement accepted here for `corpus_id` under allowed signers; None
    when none was. Raises SignatureRefused for a recorded floor that is unusable (not a
    statement, or an implausible one, e.g. a counter poisoned before issue 34): a
    silently dropped floor would allow any rollback, so the user resets it on purpose."""
    *_, path = _paths(root)
    try:
        raw = _read_bounded(path, 4 * 1024 * 1024)
    except FileNotFoundError:
        return None
    except OSError as e:
        raise SignatureRefused(
            f"{path}: cannot read the rollback floor ({e}); {reset_hint(corpus_id)}"
        ) from None
    try:
        obj = json.loads(raw)
        corpora = obj["corpora"]
        if not isinstance(corpora, dict):
            raise TypeError("corpora is not an object")
        text = corpora.get(corpus_id)
        if text is None:
            return None
        return parse_statement(text.encode("utf-8"), f"{path} ({corpus_id})")
    except StatementError as e:
        why = e.message
    except (ValueError, KeyError, TypeError, AttributeError, RecursionError) as e:
        why = f"{path}: not a {FLOOR_SCHEMA} file ({type(e).__name__})"
    raise SignatureRefused(
        f"the rollback floor recorded for corpus `{corpus_id}` is unusable: {why}; "
        f"{reset_hint(corpus_id)}"
    )


def raise_floor(root: str | os.PathLike[str], st: Statement, *, reset: bool = False) -> None:
    """Record `st` as the corpus's newest accepted statement (`reset`: whatever was
    recorded before, as `pull --reset-trust` asks). Raises OSError."""
    *_, path = _paths(root)
    try:
        obj = json.loads(_read_bounded(path, 4 * 1024 * 1024))
        corpora = obj.get("corpora") if isinstance(obj, dict) else None
        corpora = dict(corpora) if isinstance(corpora, dict) else {}
    except (OSError, ValueError, RecursionError):
        corpora = {}
    if not reset:
        try:
            old = read_floor(root, st.corpus_id)
        except SignatureRefused:
            old = None
        if old is not None and old.counter > st.counter:
            return
    corpora[st.corpus_id] = st.to_bytes().decode("utf-8")
    body = {"corpora": dict(sorted(corpora.items())), "schema": FLOOR_SCHEMA}
    atomic_write(path, (json.dumps(body, indent=2, sort_keys=True) + "\n").encode())


def check_reset(reset_trust: bool, allowed: AS.AllowedSigners | None) -> None:
    if reset_trust and allowed is None:
        raise UsageError(
            "--reset-trust replaces the rollback floor with a snapshot verified under allowed "
            "signers: pass --allowed-signers FILE or set knowledge.sync.allowed_signers"
        )


# ------------------------------------------------------------------ status / doctor


@dataclass(frozen=True)
class SignatureInfo:
    """What status and doctor say about the installed snapshot's signature."""

    #: "verified", "unverified" (no allowed signers), "refused" or "unsigned"
    state: str
    signer: str | None = None
    published_at: str | None = None
    counter: int | None = None
    problem: str | None = None
    #: "now" (checked against the allowed signers configured) or "pull" (verified when
    #: pulled, recorded then: no allowed signers are configured to check it again)
    checked: str | None = None
    principals: str | None = None
    #: when the pull that installed it verified it, and against which file
    verified_at: str | None = None
    allowed_signers: str | None = None

    def line(self) -> str:
        if self.state == "unsigned":
            return "unsigned"
        when = f" at {self.published_at}" if self.published_at else ""
        if self.state == "verified" and self.checked == "pull":
            return (
                f"signed by {self.signer}{when} (verified when pulled, {self.verified_at}, "
                f"against {self.allowed_signers}; no allowed signers configured to check again)"
            )
        if self.state == "verified":
            return f"signed by {self.signer}{when} (verified)"
        if self.state == "unverified":
            return f"signed by {self.signer}{when} (not verified: no allowed signers configured)"
        return f"signature NOT accepted: {self.problem}"

    def to_json(self) -> dict[str, Any]:
        return {
            "allowed_signers": self.allowed_signers,
            "checked": self.checked,
            "counter": self.counter,
            "principals": self.principals,
            "problem": self.problem,
            "published_at": self.published_at,
            "signer": self.signer,
            "state": self.state,
            "verified_at": self.verified_at,
        }


def installed_signature(
    root: str | os.PathLike[str],
    corpus_id: str,
    snapshot: str,
    checksum: str,
    allowed: AS.AllowedSigners | None,
) -> SignatureInfo:
    """The signature of the installed snapshot (the marker's corpus, snapshot and
    `.cck` checksum), checked against `allowed` when given (rollback included); without
    it, what the pull that installed it verified, if it did."""
    got = read_installed(root)
    if got is None:
        return SignatureInfo("unsigned")
    st_bytes, sig_bytes = got
    where = f"{display_dir_of(root)}/{STATEMENT_FILE}"
    record = read_verified(root, st_bytes)
    at_pull = {
        "verified_at": record["verified_at"] if record else None,
        "allowed_signers": record["allowed_signers"] if record else None,
    }
    if allowed is None:
        try:
            st = parse_statement(st_bytes, where)
            sig = sshsig.parse_signature(sig_bytes, where + ".sig")
        except (StatementError, sshsig.SigningError) as e:
            return SignatureInfo("refused", problem=e.message)
        if (st.corpus_id, st.snapshot, st.cck_checksum) != (corpus_id, snapshot, checksum):
            return SignatureInfo("refused", problem=f"{where} is for {st.corpus_id}@{st.snapshot}")
        if record is not None and record["signer"] == sig.signer:
            return SignatureInfo(
                "verified",
                f"{record['principals']} ({sig.signer})",
                st.published_at,
                st.counter,
                checked="pull",
                principals=record["principals"],
                **at_pull,
            )
        return SignatureInfo("unverified", sig.signer, st.published_at, st.counter)
    try:
        st, signer, sig = check_signed(allowed, st_bytes, sig_bytes, where, corpus_id)
        if (st.corpus_id, st.snapshot) != (corpus_id, snapshot):
            raise SignatureRefused(f"{where} is for {st.corpus_id}@{st.snapshot}")
        if st.cck_checksum != checksum:
            raise SignatureRefused(
                f"{where}: the signed .cck checksum {st.cck_checksum} is not the installed "
                f"snapshot's {checksum}"
            )
        check_rollback(st, read_floor(root, corpus_id), where)
    except SyncError as e:
        return SignatureInfo("refused", problem=e.message)
    return SignatureInfo(
        "verified",
        f"{signer.principals} ({sig.signer})",
        st.published_at,
        st.counter,
        checked="now",
        principals=signer.principals,
        **at_pull,
    )


def display_dir_of(root: str | os.PathLike[str]) -> str:
    return f"{os.fspath(root)}/.cce/knowledge"
