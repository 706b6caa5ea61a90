"""A `.cck` published in parts (ours; docs/spec/sync.md §13, docs/cache.md).

A large corpus changes a little each night, yet a `.cck` is one file: every push would
upload it whole and every consumer download it whole. Here the `.cck` bytes are cut at
content-defined boundaries into parts, each named by its SHA-256 and stored as a plain
git blob under `knowledge/v1/<corpus>/parts/<2 hex>/<64 hex>`, beside a small index per
snapshot, `<snapshot>.parts`. An edit to one record changes the part around it and
leaves the others as they were, so git's own negotiation moves only the new blobs, and
a consumer that kept the parts it fetched asks only for the ones it lacks.

Boundaries fall at line ends only. A `.cck` is one JSON object per line (a chunk, ~4 KB
for an issue-sized record), so a cut inside a line would buy nothing: the line is the
unit an edit changes. After each line, the part ends when it holds at least `MIN_PART`
bytes and the line's CRC-32 falls under a threshold proportional to the line's length
(a line of L bytes ends a part with probability L / (AVG_PART - MIN_PART)), so parts
average `AVG_PART` bytes whatever the line lengths. The decision depends only on the
line's own bytes and the distance to the previous cut, so the cuts resynchronise one
part after an edit. The manifest line (whose checksum changes with every snapshot) is
always a part of its own; a line longer than `MAX_PART` is cut every `MAX_PART` bytes.
CRC-32 is not a security measure here: a hostile feed can only make parts smaller or
larger (still bounded by MAX_PART), never wrong — every part is verified by its name.

The index is untrusted on pull: strict line grammar (a part name is 64 lower-case hex,
so it cannot name a path), bounded counts and sizes, and the whole `.cck` is rebuilt and
checked against the index's SHA-256 and size before the usual import verifies it again.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import re
import stat
import subprocess
import tempfile
import threading
import zlib
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

from cce_knowledge.core.errors import SyncError
from cce_knowledge.core.untrusted import shown

SCHEMA = "cce.cckparts/v1"

#: Average part size (measured in bench/bench_nightly.py: 64 KiB keeps a night with
#: 0.1% scattered changes under 2% of the `.cck` while the index stays ~0.1%).
AVG_PART = 64 * 1024
MIN_PART = AVG_PART // 4
#: The largest part we cut; a reader accepts up to READ_MAX_PART (room for other settings).
MAX_PART = 1024 * 1024
READ_MAX_PART = 8 * 1024 * 1024
#: An index larger than this is refused before it is read (1M parts ≈ 72 MB).
MAX_INDEX_BYTES = 128 * 1024 * 1024
#: Below this size a corpus is also (by default: only) published as a plain `.cck`,
#: which the reference engine reads; above it, only parts (docs/spec/sync.md §13.2).
PLAIN_CCK_MAX = 32 * 1024 * 1024

_LINE = re.compile(rb"([0-9a-f]{64}) ([1-9][0-9]{0,9})")
_HEX64 = re.compile(r"[0-9a-f]{64}")


class PartsError(SyncError):
    """A parted artifact that cannot be rebuilt: refused, nothing installed."""


@dataclass(frozen=True, slots=True)
class PartRef:
    sha256: str
    size: int


@dataclass(frozen=True, slots=True)
class PartIndex:
    """`<snapshot>.parts`: the `.cck`'s size and SHA-256, and its parts in order."""

    size: int
    sha256: str
    parts: tuple[PartRef, ...]

    def encode(self) -> bytes:
        head = f"{SCHEMA}\nsize {self.size}\nsha256 {self.sha256}\nparts {len(self.parts)}\n"
        body = "".join(f"{p.sha256} {p.size}\n" for p in self.parts)
        return (head + body).encode("ascii")

    def names(self) -> set[str]:
        return {p.sha256 for p in self.parts}


# ---------------------------------------------------------------- cutting


def cut_points(data: Any) -> Iterator[tuple[int, int]]:
    """(start, end) of each part of `data` (bytes or a read-only buffer), in order,
    covering it exactly."""
    n = len(data)
    view = memoryview(data)
    span = AVG_PART - MIN_PART
    start = pos = 0
    first = True
    try:
        while pos < n:
            nl = data.find(b"\n", pos)
            end = n if nl < 0 else nl + 1
            if end - start > MAX_PART:
                if pos > start:
                    yield start, pos
                    start = pos
                while end - start > MAX_PART:
                    yield start, start + MAX_PART
                    start += MAX_PART
            line = end - pos
            if first or (end - start >= MIN_PART and zlib.crc32(view[pos:end]) * span < line << 32):
                if end > start:
                    yield start, end
                start = end
            first = False
            pos = end
        if start < n:
            yield start, n
    finally:
        view.release()


def split(data: Any) -> tuple[PartIndex, list[tuple[int, int]]]:
    """The index of `data` and each part's (start, end)."""
    spans = list(cut_points(data))
    view = memoryview(data)
    try:
        refs = tuple(PartRef(hashlib.sha256(view[a:b]).hexdigest(), b - a) for a, b in spans)
    finally:
        view.release()
    return PartIndex(len(data), hashlib.sha256(data).hexdigest(), refs), spans


# ---------------------------------------------------------------- the index, untrusted


def parse_index(key: str, data: bytes) -> PartIndex:
    """A `.parts` index read from a cache: every deviation from the grammar is refused,
    naming the key and line."""
    if len(data) > MAX_INDEX_BYTES:
        raise PartsError(f"{key}: {len(data)} bytes, larger than {MAX_INDEX_BYTES}: refused")
    lines = data.split(b"\n")
    if not lines or lines[-1] != b"":
        raise PartsError(f"{key}: not a part index (no final line feed)")
    lines.pop()

    def head(i: int, name: str, pattern: str) -> str:
        want = re.compile(f"{name} ({pattern})".encode())
        m = want.fullmatch(lines[i]) if i < len(lines) else None
        if m is None:
            raise PartsError(f"{key}:{i + 1}: expected `{name} …`, found `{_line(lines, i)}`")
        return m.group(1).decode("ascii")

    if not lines or lines[0] != SCHEMA.encode():
        raise PartsError(f"{key}:1: not a part index (`{SCHEMA}` expected)")
    size = int(head(1, "size", "0|[1-9][0-9]{0,15}"))
    sha = head(2, "sha256", "[0-9a-f]{64}")
    count = int(head(3, "parts", "0|[1-9][0-9]{0,9}"))
    if len(lines) - 4 != count:
        raise PartsError(f"{key}: the index says {count} parts but lists {len(lines) - 4}")
    refs: list[PartRef] = []
    total = 0
    for i in range(4, len(lines)):
        m = _LINE.fullmatch(lines[i])
        if m is None:
            raise PartsError(
                f"{key}:{i + 1}: not a part line (`<64 hex> <size>`): `{_line(lines, i)}`"
            )
        part_size = int(m.group(2))
        if part_size > READ_MAX_PART:
            raise PartsError(
                f"{key}:{i + 1}: a part of {part_size} bytes, larger than {READ_MAX_PART}: refused"
            )
        total += part_size
        refs.append(PartRef(m.group(1).decode("ascii"), part_size))
    if total != size:
        raise PartsError(f"{key}: the parts add up to {total} bytes, the index says {size}")
    return PartIndex(size, sha, tuple(refs))


def _line(lines: list[bytes], i: int) -> str:
    return shown(lines[i][:120].decode("utf-8", "replace")) if i < len(lines) else ""


# ---------------------------------------------------------------- keys


def part_key(prefix: str, sha: str) -> str:
    """`prefix` is the corpus's `knowledge/v1/<id>`."""
    return f"{prefix}/parts/{sha[:2]}/{sha}"


def parts_dir(prefix: str) -> str:
    return f"{prefix}/parts"


def part_name(key: str) -> str | None:
    """The part's sha256 if `key` is a well-formed part key, else None."""
    head, _, name = key.rpartition("/")
    return name if _HEX64.fullmatch(name) and head.endswith(f"/parts/{name[:2]}") else None


# ---------------------------------------------------------------- the local part store


class PartStore:
    """What a consumer fetched, kept under `$CCE_HOME/sync/parts/` so the next pull
    asks only for new parts. Bounded: after each pull, only the parts named by the
    last-installed index of each corpus (`keep/<corpus>.parts`) stay."""

    def __init__(self, root: Path) -> None:
        self.root = root

    def path(self, sha: str) -> Path:
        return self.root / sha[:2] / sha

    def read(self, ref: PartRef) -> bytes | None:
        """The part if it is here, a regular file of the right size and content; a
        damaged one is deleted (it is fetched again)."""
        p = self.path(ref.sha256)
        try:
            st = os.lstat(p)
        except OSError:
            return None
        if not stat.S_ISREG(st.st_mode) or st.st_size != ref.size:
            _unlink(p)
            return None
        try:
            fd = os.open(p, os.O_RDONLY | os.O_NOFOLLOW)
            with os.fdopen(fd, "rb") as f:
                data = f.read(ref.size + 1)
        except OSError:
            return None
        if len(data) != ref.size or hashlib.sha256(data).hexdigest() != ref.sha256:
            _unlink(p)
            return None
        return data

    def has(self, ref: PartRef) -> bool:
        try:
            st = os.lstat(self.path(ref.sha256))
        except OSError:
            return False
        return stat.S_ISREG(st.st_mode) and st.st_size == ref.size

    def put(self, sha: str, data: bytes) -> None:
        d = self.root / sha[:2]
        try:
            d.mkdir(parents=True, exist_ok=True)
            fd, tmp = tempfile.mkstemp(prefix=".part.", dir=d)
            with os.fdopen(fd, "wb") as f:
                f.write(data)
            os.replace(tmp, d / sha)
        except OSError:
            pass  # the cache is an optimisation: a part not kept is fetched next time

    def keep(self, corpus_id: str, index: bytes) -> None:
        """Record the index whose parts stay, then drop every other part."""
        with contextlib.suppress(OSError):
            k = self.root / "keep"
            k.mkdir(parents=True, exist_ok=True)
            fd, tmp = tempfile.mkstemp(prefix=".keep.", dir=k)
            with os.fdopen(fd, "wb") as f:
                f.write(index)
            os.replace(tmp, k / f"{corpus_id}.parts")
        self.evict()

    def kept_names(self) -> set[str] | None:
        """The parts the kept indexes name; None when one cannot be read (evict nothing)."""
        names: set[str] = set()
        k = self.root / "keep"
        try:
            entries = sorted(k.iterdir()) if k.is_dir() else []
        except OSError:
            return None
        for p in entries:
            if p.name.startswith("."):
                continue
            try:
                names |= parse_index(p.name, _read_plain(p, MAX_INDEX_BYTES)).names()
            except (OSError, SyncError):
                _unlink(p)  # a damaged keep record only loses its parts' place
        return names

    def scan(self) -> Iterator[tuple[Path, str | None]]:
        """Every file in the store's fan-out, with its part name (None: a stray)."""
        try:
            dirs = sorted(self.root.iterdir()) if self.root.is_dir() else []
        except OSError:
            return
        for d in dirs:
            if d.name == "keep" or not re.fullmatch(r"[0-9a-f]{2}", d.name):
                continue
            with contextlib.suppress(OSError):
                for p in sorted(d.iterdir()):
                    ok = _HEX64.fullmatch(p.name) and p.name[:2] == d.name
                    yield p, (p.name if ok else None)

    def evict(self) -> int:
        """Delete parts no kept index names (and strays); returns how many went."""
        keep = self.kept_names()
        if keep is None:
            return 0
        gone = 0
        for p, name in self.scan():
            if name is None or name not in keep:
                _unlink(p)
                gone += 1
        return gone

    def usage(self) -> tuple[int, int]:
        """(parts, bytes) held."""
        count = size = 0
        for p, name in self.scan():
            if name is not None:
                with contextlib.suppress(OSError):
                    size += os.lstat(p).st_size
                    count += 1
        return count, size

    def repair(self) -> tuple[int, int]:
        """Verify every part against its name; delete damaged ones and strays and the
        parts no kept index names. Returns (checked, removed)."""
        checked = removed = 0
        for p, name in self.scan():
            checked += 1
            ok = False
            if name is not None:
                try:
                    ok = hashlib.sha256(_read_plain(p, READ_MAX_PART)).hexdigest() == name
                except OSError:
                    ok = False
            if not ok:
                _unlink(p)
                removed += 1
        return checked, removed + self.evict()


def _read_plain(p: Path, limit: int) -> bytes:
    fd = os.open(p, os.O_RDONLY | os.O_NOFOLLOW)
    with os.fdopen(fd, "rb") as f:
        if not stat.S_ISREG(os.fstat(f.fileno()).st_mode):
            raise OSError(f"{p} is not a regular file")
        data = f.read(limit + 1)
    if len(data) > limit:
        raise OSError(f"{p} is larger than {limit} bytes")
    return data


def _unlink(p: Path) -> None:
    with contextlib.suppress(OSError):
        p.unlink()


# ---------------------------------------------------------------- reading parts from git


@dataclass
class GitParts:
    """The part blobs of one corpus in a git repository on this machine (a local
    remote read in place, or the working clone after its fetch), read with one
    `ls-tree` and one `cat-file --batch`."""

    git_dir: Path
    ref: str
    prefix: str
    env: dict[str, str] | None = None

    def _git(self, *args: str) -> list[str]:
        return ["git", f"--git-dir={self.git_dir}", *args]

    def entries(self) -> dict[str, tuple[str, str]]:
        """part name -> (mode, object id) for the parts under the corpus's fan-out."""
        out = subprocess.run(
            self._git("ls-tree", "-r", "-z", self.ref, "--", parts_dir(self.prefix) + "/"),
            capture_output=True,
            env=self.env,
            check=False,
        )
        found: dict[str, tuple[str, str]] = {}
        if out.returncode != 0:
            return found
        for entry in out.stdout.split(b"\0"):
            meta, _, raw = entry.partition(b"\t")
            f = meta.split(b" ")
            name = part_name(raw.decode("utf-8", "replace"))
            if name is not None and len(f) == 3:
                found[name] = (f[0].decode("ascii", "replace"), f[2].decode("ascii", "replace"))
        return found

    def read(self, refs: list[PartRef]) -> Iterator[tuple[PartRef, bytes]]:
        """Each wanted part's bytes, checked: present, a regular file (never a symlink
        or a tree), the index's size (before it is read) and content."""
        if not refs:
            return
        have = self.entries()
        oids: list[str] = []
        for r in refs:
            key = part_key(self.prefix, r.sha256)
            got = have.get(r.sha256)
            if got is None:
                raise PartsError(f"cache miss: {key} not found on the remote")
            if got[0] not in ("100644", "100755"):
                raise PartsError(f"{key}: not a regular file in the cache (mode {got[0]}): refused")
            oids.append(got[1])
        proc = subprocess.Popen(
            self._git("cat-file", "--batch"),
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            env=self.env,
        )
        assert proc.stdin is not None and proc.stdout is not None
        feeder = threading.Thread(target=_feed, args=(proc.stdin, oids), daemon=True)
        feeder.start()
        try:
            for r in refs:
                yield r, _batch_item(proc.stdout, r, part_key(self.prefix, r.sha256))
        finally:
            proc.kill()
            proc.wait()
            feeder.join()
            proc.stdout.close()


def _feed(stdin: IO[bytes], oids: list[str]) -> None:
    with contextlib.suppress(OSError, ValueError):
        for oid in oids:
            stdin.write(oid.encode("ascii") + b"\n")
        stdin.close()


def _batch_item(out: IO[bytes], ref: PartRef, key: str) -> bytes:
    header = out.readline(256).split()
    if len(header) != 3 or header[1] != b"blob" or not header[2].isdigit():
        raise PartsError(f"{key}: cannot be read from the cache")
    size = int(header[2])
    if size != ref.size:
        raise PartsError(f"{key}: {size} bytes in the cache, the index says {ref.size}: refused")
    data = out.read(size)
    out.read(1)
    if len(data) != size or hashlib.sha256(data).hexdigest() != ref.sha256:
        raise PartsError(f"{key}: its content does not match its name: refused")
    return data


# ---------------------------------------------------------------- rebuilding


def rebuild(
    key: str,
    index: PartIndex,
    fetch: Callable[[list[PartRef]], Iterable[tuple[PartRef, bytes]]],
    store: PartStore,
    out_path: Path,
) -> tuple[int, int]:
    """Write the `.cck` the index describes to `out_path`: parts from `store` when it has
    them, the rest through `fetch` (kept in `store`), each verified; then the whole
    against the index's size and SHA-256. Returns (parts fetched, bytes fetched)."""
    missing = [r for r in dict.fromkeys(index.parts) if not store.has(r)]
    fetched_parts = fetched_bytes = 0
    fresh: dict[str, bytes] = {}
    # Kept in memory only when the store refuses them (a read-only CCE_HOME).
    for ref, data in fetch(missing):
        store.put(ref.sha256, data)
        fetched_parts += 1
        fetched_bytes += len(data)
        if not store.has(ref):
            fresh[ref.sha256] = data
    whole = hashlib.sha256()
    size = 0
    with open(out_path, "wb") as f:
        for ref in index.parts:
            part = fresh.get(ref.sha256) or store.read(ref)
            if part is None:  # damaged since it was fetched: once more, from the cache
                part = next(iter(fetch([ref])))[1]
            f.write(part)
            whole.update(part)
            size += len(part)
    if size != index.size or whole.hexdigest() != index.sha256:
        raise PartsError(
            f"{key}: the rebuilt artifact ({size} bytes, sha256 {whole.hexdigest()}) does not "
            f"match the index ({index.size} bytes, sha256 {index.sha256}): refused"
        )
    return fetched_parts, fetched_bytes
