"""Issue 34 §10: `.cce/knowledge/pulled-from.json` (ours) and `synced.json` (the
reference's marker) are read as untrusted: nested 100,000 deep they are unreadable, not
a RecursionError traceback, and a file of 64 MiB is not read whole. Real `cce`
processes on a real pull from a real bare cache."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from tests.helpers.cce_proc import CCE
from tests.helpers.pulled import Pulled, cce, publish_and_pull

pytestmark = pytest.mark.slow

#: 100,000 deep (the issue's probe), and 30,000 deep: under the size bound, still past
#: Python's recursion limit.
DEEP = [b"[" * n + b"]" * n for n in (100_000, 30_000)]


@pytest.fixture
def pulled(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Pulled:
    monkeypatch.setenv("CCE_HOME", str(tmp_path / "home"))
    return publish_and_pull(tmp_path)


def _kdir(p: Pulled) -> Path:
    return p.consumer / ".cce" / "knowledge"


@pytest.mark.parametrize("deep", DEEP, ids=["100k", "30k"])
@pytest.mark.parametrize("name", ["pulled-from.json", "synced.json"])
def test_a_deeply_nested_record_is_unreadable_not_a_traceback(
    pulled: Pulled, name: str, deep: bytes
) -> None:
    (_kdir(pulled) / name).write_bytes(deep)
    st = cce("knowledge", "status", "--dir", str(pulled.consumer), "--offline")
    assert st.returncode == 0, st.stderr
    assert "Traceback" not in st.stderr and "RecursionError" not in st.stderr
    assert "snapshot" in st.stdout
    args = ("knowledge", "pull", "--corpus", "acme", "--remote", pulled.url)
    p = cce(*args, "--dir", str(pulled.consumer))
    assert "Traceback" not in p.stderr and "RecursionError" not in p.stderr
    if name == "synced.json":
        # The marker guards which corpus is active: a corrupt one is refused by name.
        assert p.returncode == 1
        why = "nested too deeply" if len(deep) < 65536 else "larger than 65536 bytes"
        assert f"synced.json is unreadable/corrupt: {why}" in p.stderr
        assert "--force" in p.stderr
        p = cce(*args, "--dir", str(pulled.consumer), "--force")
    assert p.returncode == 0, p.stderr
    # The pull wrote a fresh record over the damaged one.
    assert len((_kdir(pulled) / name).read_bytes()) < 1000


#: Runs argv and prints its peak resident memory (KiB): measured from a small parent, as
#: a child forked from the test process would count the test's own pages too.
_PEAK = (
    "import resource, subprocess, sys; "
    "p = subprocess.run(sys.argv[1:], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE); "
    "sys.stderr.buffer.write(p.stderr); "
    "print(p.returncode, resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)"
)


def _max_rss_kib(argv: list[str]) -> tuple[int, str]:
    """Peak resident memory (KiB, as Linux counts it) of one `cce` process, and its stderr."""
    p = subprocess.run(
        [sys.executable, "-c", _PEAK, *argv], capture_output=True, text=True, check=True
    )
    rc, peak = p.stdout.split()
    assert rc == "0", p.stderr
    return int(peak), p.stderr


def test_a_huge_record_is_not_read_whole(pulled: Pulled) -> None:
    argv = [*CCE, "knowledge", "status", "--dir", str(pulled.consumer), "--offline"]
    baseline, _ = _max_rss_kib(argv)
    # A valid record that names the corpus, padded to 64 MiB.
    record = _kdir(pulled) / "pulled-from.json"
    head = record.read_bytes()[:-1]
    with record.open("wb") as f:
        f.write(head + b',"pad":"')
        for _ in range(64):
            f.write(b"x" * (1 << 20))
        f.write(b'"}')
    peak, err = _max_rss_kib(argv)
    assert "Traceback" not in err
    # Read whole, the file alone is 64 MiB of bytes and 64 MiB of text.
    assert peak - baseline < 16 * 1024, (baseline, peak)
    st = cce("knowledge", "status", "--dir", str(pulled.consumer), "--offline")
    assert st.returncode == 0 and pulled.url not in st.stdout, st.stdout
