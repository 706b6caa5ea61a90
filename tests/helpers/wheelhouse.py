"""An offline wheelhouse and hashed lock for the act tests of the Action's setup.

The setup step installs requirements/runtime.txt with `pip --require-hashes`. The act
tests may not reach PyPI, so they give the Action what it needs explicitly: every
distribution the lock names (for this platform and Python), repacked as a wheel from
the test interpreter's own installed copy, and a lock of the same shape whose hashes
are those wheels'. The Action under test is a copy of this checkout, so the copy gets
that lock in place of the real one; pip then runs with PIP_NO_INDEX and
PIP_FIND_LINKS pointing at the wheelhouse. Whether the real lock is in step with
pyproject.toml is tested separately (tests/action/test_runtime_lock.py).
"""

from __future__ import annotations

import base64
import hashlib
import importlib.metadata as md
import re
import zipfile
from dataclasses import dataclass
from pathlib import Path

from packaging.markers import Marker
from packaging.utils import canonicalize_name

_ENTRY = re.compile(r"^([A-Za-z0-9][A-Za-z0-9._-]*)==(\S+)(?:\s*;\s*([^\\]+?))?\s*\\?$")
_SKIP_SUFFIXES = (".pyc",)
_SKIP_DIST_INFO = ("RECORD", "INSTALLER", "REQUESTED", "direct_url.json")


class WheelhouseUnavailable(Exception):
    """A distribution the lock needs cannot be provided from this interpreter."""


@dataclass(frozen=True)
class LockEntry:
    name: str
    version: str
    marker: str | None

    def applies(self) -> bool:
        return self.marker is None or Marker(self.marker).evaluate()


def read_lock(path: Path) -> list[LockEntry]:
    """The `name==version ; marker` entries of a pip-compile/uv lock file."""
    out = []
    for line in path.read_text(encoding="utf-8").splitlines():
        if m := _ENTRY.match(line):
            marker = m[3].strip() if m[3] else None
            out.append(LockEntry(m[1], m[2], marker))
    return out


def _wheel_tag(dist: md.Distribution) -> str:
    wheel = dist.read_text("WHEEL") or ""
    tags = [ln.split(":", 1)[1].strip() for ln in wheel.splitlines() if ln.startswith("Tag:")]
    if not tags:
        raise WheelhouseUnavailable(f"{dist.metadata['Name']}: installed without a WHEEL file")
    parts = [t.split("-") for t in tags]
    return "-".join(".".join(dict.fromkeys(p[i] for p in parts)) for i in range(3))


def _record_hash(data: bytes) -> str:
    digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
    return f"sha256={digest}"


def repack(dist: md.Distribution, out_dir: Path) -> Path:
    """A wheel with the files of an installed distribution (console scripts come back
    from entry_points.txt when pip installs it)."""
    files = dist.files
    if files is None:
        raise WheelhouseUnavailable(f"{dist.metadata['Name']}: installed without a RECORD")
    name = re.sub(r"[-_.]+", "_", dist.metadata["Name"])
    version = dist.version
    whl = out_dir / f"{name}-{version}-{_wheel_tag(dist)}.whl"
    record: list[str] = []
    dist_info = ""
    with zipfile.ZipFile(whl, "w", zipfile.ZIP_STORED) as z:
        for f in sorted(files, key=str):
            rel = f.as_posix()
            top = rel.split("/", 1)[0]
            if rel.startswith("..") or "__pycache__" in rel or rel.endswith(_SKIP_SUFFIXES):
                continue
            if top.endswith(".dist-info"):
                dist_info = top
                if rel.rsplit("/", 1)[-1] in _SKIP_DIST_INFO:
                    continue
            path = Path(str(dist.locate_file(f)))
            if not path.is_file():
                continue
            data = path.read_bytes()
            z.writestr(rel, data)
            record.append(f"{rel},{_record_hash(data)},{len(data)}")
        if not dist_info:
            raise WheelhouseUnavailable(f"{name}: no .dist-info in its RECORD")
        record.append(f"{dist_info}/RECORD,,")
        z.writestr(f"{dist_info}/RECORD", "\n".join(record) + "\n")
    return whl


def build(lock: Path, out_dir: Path) -> str:
    """Fill `out_dir` with a wheel per applicable lock entry; return the text of a
    hashed lock naming exactly those wheels."""
    out_dir.mkdir(parents=True, exist_ok=True)
    installed = {canonicalize_name(d.metadata["Name"]): d for d in md.distributions()}
    lines = ["# The act tests' lock: requirements/runtime.txt's set, as installed here."]
    for entry in read_lock(lock):
        if not entry.applies():
            continue
        dist = installed.get(canonicalize_name(entry.name))
        if dist is None:
            raise WheelhouseUnavailable(f"{entry.name} is not installed in this interpreter")
        whl = repack(dist, out_dir)
        digest = hashlib.sha256(whl.read_bytes()).hexdigest()
        lines.append(f"{entry.name}=={dist.version} \\\n    --hash=sha256:{digest}")
    return "\n".join(lines) + "\n"
