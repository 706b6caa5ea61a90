"""requirements/runtime.txt, the hashed lock the Action's setup installs, is in step
with pyproject.toml: every runtime dependency and the build backend are pinned to a
version their specifiers allow, on every Python and platform the lock covers, every
pin carries hashes, and nothing is pinned that no root needs."""

from __future__ import annotations

import re
import tomllib

import pytest
from packaging.markers import Marker
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name
from packaging.version import Version

from tests.helpers.paths import REPO

LOCK = REPO / "requirements" / "runtime.txt"
BUILD_IN = REPO / "requirements" / "build.in"
COMMAND = (
    "uv pip compile pyproject.toml requirements/build.in --universal --python-version 3.11 "
    "--generate-hashes -o requirements/runtime.txt"
)
REGENERATE = f"regenerate it: pip install uv && {COMMAND}"
ROOTS = {"cce-knowledge (pyproject.toml)", "-r requirements/build.in"}
#: (python_version, python_full_version, sys_platform, platform_system) the Action runs on.
ENVIRONMENTS = [
    (f"3.{minor}", f"3.{minor}.0", plat, system)
    for minor in (11, 12, 13)
    for plat, system in (("linux", "Linux"), ("darwin", "Darwin"))
]


def _entries() -> list[tuple[str, Version, str | None, list[str], list[str]]]:
    """(name, version, marker, hashes, via) per pin, parsed from the uv/pip-compile format."""
    out: list[tuple[str, Version, str | None, list[str], list[str]]] = []
    for block in re.split(r"\n(?=[A-Za-z0-9])", LOCK.read_text(encoding="utf-8")):
        head = block.split("\n", 1)[0]
        m = re.match(r"([A-Za-z0-9][A-Za-z0-9._-]*)==([^\s;\\]+)\s*(?:;\s*([^\\]+?))?\s*\\?$", head)
        if not m:
            continue
        hashes = re.findall(r"--hash=sha256:([0-9a-f]{64})", block)
        via: list[str] = []
        for ln in block.split("\n")[1:]:
            ln = ln.strip()
            if ln == "# via":
                continue
            if ln.startswith("# via "):
                via.append(ln.removeprefix("# via ").strip())
            elif ln.startswith("#   "):
                via.append(ln.removeprefix("#").strip())
        out.append((m[1], Version(m[2]), m[3].strip() if m[3] else None, hashes, via))
    return out


def _applies(marker: str | None, env: tuple[str, str, str, str]) -> bool:
    if marker is None:
        return True
    py, full, plat, system = env
    return Marker(marker).evaluate(
        {
            "python_version": py,
            "python_full_version": full,
            "sys_platform": plat,
            "platform_system": system,
            "implementation_name": "cpython",
            "platform_python_implementation": "CPython",
            "os_name": "posix",
            "platform_machine": "x86_64",
            "extra": "",
        }
    )


def _pyproject() -> dict:
    return tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))


def test_lock_names_the_command_that_made_it() -> None:
    assert f"#    {COMMAND}\n" in LOCK.read_text(encoding="utf-8"), REGENERATE


def test_build_in_is_the_build_system_requirement() -> None:
    lines = [
        ln.strip()
        for ln in BUILD_IN.read_text(encoding="utf-8").splitlines()
        if ln.strip() and not ln.startswith("#")
    ]
    assert lines == _pyproject()["build-system"]["requires"]


def test_every_pin_carries_hashes() -> None:
    entries = _entries()
    assert len(entries) > 20
    for name, version, _, hashes, _ in entries:
        assert hashes, f"{name}=={version} has no --hash; {REGENERATE}"


@pytest.mark.parametrize("env", ENVIRONMENTS, ids=lambda e: f"py{e[0]}-{e[2]}")
def test_every_requirement_is_pinned_within_its_specifier(env: tuple[str, str, str, str]) -> None:
    py = _pyproject()
    wanted = [
        Requirement(r) for r in (*py["project"]["dependencies"], *py["build-system"]["requires"])
    ]
    pins: dict[str, list[Version]] = {}
    for name, version, marker, _, _ in _entries():
        if _applies(marker, env):
            pins.setdefault(canonicalize_name(name), []).append(version)
    for req in wanted:
        got = pins.get(canonicalize_name(req.name))
        assert got, f"{req.name} is not pinned for {env}; {REGENERATE}"
        assert len(got) == 1, f"{req.name} is pinned twice for {env}: {got}"
        assert req.specifier.contains(got[0], prereleases=True), (
            f"{req.name}=={got[0]} is outside {req.specifier} (pyproject.toml); {REGENERATE}"
        )


def test_every_pin_is_needed_by_a_root() -> None:
    """uv's `# via` lines: each pin traces back to pyproject.toml or build.in, so a
    dependency dropped from pyproject.toml cannot linger in the lock."""
    entries = _entries()
    parents = {canonicalize_name(n): via for n, _, _, _, via in entries}
    for name in parents:
        seen: set[str] = set()
        todo = [name]
        rooted = False
        while todo and not rooted:
            cur = todo.pop()
            if cur in seen:
                continue
            seen.add(cur)
            for v in parents.get(cur, []):
                if v in ROOTS:
                    rooted = True
                    break
                todo.append(canonicalize_name(v.split(" ")[0]))
        assert rooted, f"{name} is pinned but nothing in pyproject.toml needs it; {REGENERATE}"
