"""Property test: hostile cache trees never let a command write outside its root or
clone, never lose the installed store, never hang and never crash (issue 12).

Each example copies a good cache (a bare repo over file:// with git-LFS) and a
consumer root that pulled from it, then tampers with the copy the way a cache writer
could: symlinks on the paths push and pull touch, odd `current` pointers and metadata
with control characters, LFS objects replaced by FIFOs or symlinks. It then runs real
`cce` processes — pull (in place and through the working clone), `sync list`,
`sync pull --all`, push — each under a time limit.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

import git
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.helpers.sync import clean_env, feed, index, make_bare

pytestmark = pytest.mark.slow

PREFIX = "knowledge/v1/kn"
TIMEOUT = 60
# Paths a cache writer could turn into a symlink pointing outside.
LINKABLE = [".gitattributes", "knowledge", "knowledge/v1", PREFIX, f"{PREFIX}/corpus.json",
            f"{PREFIX}/current"]  # fmt: skip
POINTERS = st.one_of(
    st.sampled_from(["", "../../../etc", "0123456789abcdef", "DEADBEEFDEADBEEF", "x" * 5000]),
    st.text(
        st.characters(codec="utf-8", categories=("Cc", "Cf", "Lu", "Nd", "Po", "Zs")),
        max_size=40,
    ),
    st.just("0123456789abcdef\n::warning title=x::owned\n\x1b[2J"),
)
LFS_TAMPER = st.sampled_from(["none", "fifo", "symlink-fifo", "symlink-outside", "truncate"])


@dataclass(frozen=True)
class Tamper:
    links: tuple[str, ...]
    pointer: str | None
    data_as_of: str | None
    lfs: str


TAMPERS = st.builds(
    Tamper,
    links=st.lists(st.sampled_from(LINKABLE), max_size=2, unique=True).map(tuple),
    pointer=st.none() | POINTERS,
    data_as_of=st.none() | st.text(st.characters(codec="utf-8"), max_size=20),
    lfs=LFS_TAMPER,
)


def _env(home: Path, extra: dict[str, str] | None = None) -> dict[str, str]:
    ident = {"GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@t", "GIT_COMMITTER_NAME": "t",
             "GIT_COMMITTER_EMAIL": "t@t"}  # fmt: skip
    return clean_env({"CCE_HOME": str(home), **ident, **(extra or {})})


def _cce(home: Path, *argv: str, extra: dict[str, str] | None = None) -> tuple[int, str, str]:
    try:
        p = subprocess.run(
            [sys.executable, "-m", "cce_knowledge", *argv],
            capture_output=True,
            text=True,
            timeout=TIMEOUT,
            env=_env(home, extra),
        )
    except subprocess.TimeoutExpired:
        pytest.fail(f"`cce {' '.join(argv)}` hung (> {TIMEOUT}s) on a hostile cache")
    return p.returncode, p.stdout, p.stderr


def _tree(d: Path) -> dict[str, bytes | str]:
    """Every entry under `d`: file bytes, or the kind for anything else."""
    out: dict[str, bytes | str] = {}
    for p in sorted(d.rglob("*")):
        rel = str(p.relative_to(d))
        if p.is_symlink():
            out[rel] = "symlink:" + os.readlink(p)
        elif p.is_file():
            out[rel] = p.read_bytes()
        else:
            out[rel] = "dir" if p.is_dir() else "other"
    return out


@pytest.fixture(scope="module")
def template(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A good cache, its producer and a consumer that pulled from it."""
    base = tmp_path_factory.mktemp("hostile")
    url = make_bare(base / "cache.git")
    prod = base / "producer"
    index(prod, feed(["kn:1", ("kn:2", "Second body with words.")]))
    home = base / "home"
    rc, _, err = _cce(home, "knowledge", "push", "--corpus", "kn", "--remote", url,
                      "--dir", str(prod))  # fmt: skip
    assert rc == 0, err
    rc, _, err = _cce(home, "knowledge", "pull", "--corpus", "kn", "--remote", url,
                      "--dir", str(base / "consumer"))  # fmt: skip
    assert rc == 0, err
    index(prod, feed(["kn:1", ("kn:2", "Second body with words."), "kn:3"]))  # a superset
    shutil.rmtree(home)
    return base


def _tamper(bare: Path, work: Path, outside: Path, t: Tamper) -> None:
    repo = git.Repo.clone_from(bare.as_uri(), work, env={"GIT_LFS_SKIP_SMUDGE": "1"})
    with repo.config_writer() as cw:
        cw.set_value("user", "name", "attacker")
        cw.set_value("user", "email", "a@a")
    if t.pointer is not None and not any(f"{PREFIX}/current".startswith(link) for link in t.links):
        (work / PREFIX / "current").write_bytes(t.pointer.encode("utf-8", "surrogatepass"))
    if t.data_as_of is not None and not any(
        f"{PREFIX}/corpus.json".startswith(link) for link in t.links
    ):
        (work / PREFIX / "corpus.json").write_text(
            json.dumps({"data_as_of": t.data_as_of, "current": "x"}, ensure_ascii=False),
            encoding="utf-8",
            errors="surrogatepass",
        )
    for link in t.links:
        p = work / link
        if p.is_symlink() or not p.exists():
            continue  # already under a linked directory
        if p.is_dir():
            shutil.rmtree(p)
            p.symlink_to(outside, target_is_directory=True)
        else:
            p.unlink()
            p.symlink_to(outside / "victim.txt")
    repo.git.add("-A")
    if repo.is_dirty(index=True, untracked_files=True):
        repo.git.commit("-q", "-m", "tamper")
        repo.git.push("-q", "origin", "HEAD:refs/heads/main")
    objects = [p for p in (bare / "lfs" / "objects").rglob("*") if p.is_file()]
    for obj in objects:
        if t.lfs == "fifo":
            obj.unlink()
            os.mkfifo(obj)
        elif t.lfs == "symlink-fifo":
            obj.unlink()
            os.mkfifo(outside / "fifo")
            obj.symlink_to(outside / "fifo")
        elif t.lfs == "symlink-outside":
            obj.unlink()
            obj.symlink_to(outside / "victim.txt")
        elif t.lfs == "truncate":
            obj.write_bytes(obj.read_bytes()[: obj.stat().st_size // 2])


def _assert_clean_output(cmd: str, rc: int, out: str, err: str) -> None:
    assert rc in (0, 1), (cmd, rc, err)
    assert "Traceback" not in err, (cmd, err)
    if rc == 1:
        # A `note:` (which remote or corpus a bare pull chose) may come first.
        assert "\nerror: " in "\n" + err or "warning" in err, (cmd, err)
    for text in (out, err):
        assert "\x1b" not in text, (cmd, text)
        assert not any(line.startswith("::") for line in text.split("\n")), (cmd, text)


@settings(
    max_examples=int(os.environ.get("CCE_HOSTILE_EXAMPLES", "12")),
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(t=TAMPERS)
def test_hostile_cache_trees(template: Path, t: Tamper) -> None:
    with tempfile.TemporaryDirectory(prefix="hostile-") as tmp:
        base = Path(tmp)
        shutil.copytree(template, base / "t", symlinks=True)
        bare, prod, cons = (
            base / "t" / "cache.git",
            base / "t" / "producer",
            base / "t" / "consumer",
        )
        outside = base / "outside"
        (outside / "sub").mkdir(parents=True)
        (outside / "victim.txt").write_bytes(b"precious\n")
        _tamper(bare, base / "attacker", outside, t)
        guarded = _tree(outside)
        store_before = _tree(cons / ".cce" / "knowledge")
        url = bare.as_uri()
        runs = [
            ("pull in place", ("knowledge", "pull", "--corpus", "kn", "--remote", url,
                               "--dir", str(cons)), {}),
            ("pull via clone", ("knowledge", "pull", "--corpus", "kn", "--remote", url,
                                "--dir", str(cons)), {"CCE_LFS_IN_PLACE": "0"}),
            ("sync list", ("sync", "list", "--remote", url), {}),
            ("sync pull --all", ("sync", "pull", "--all", "--into", str(cons), "--remote", url),
             {}),
            ("push", ("knowledge", "push", "--corpus", "kn", "--remote", url, "--dir", str(prod)),
             {}),
        ]  # fmt: skip
        for i, (name, argv, extra) in enumerate(runs):
            rc, out, err = _cce(base / f"home{i}", *argv, extra=extra)
            _assert_clean_output(name, rc, out, err)
            if name.startswith("pull") and rc == 1:
                after = _tree(cons / ".cce" / "knowledge")
                after.pop(".lock", None)
                before = dict(store_before)
                before.pop(".lock", None)
                assert after == before, f"{name} refused but changed the installed store"
            assert _tree(outside) == guarded, f"{name} wrote outside its root/clone"
        # Whatever happened, the consumer still searches.
        rc, out, err = _cce(base / "home-s", "knowledge", "search", "Second body",
                            "--dir", str(cons))  # fmt: skip
        assert rc == 0 and "kn:2" in out, err
