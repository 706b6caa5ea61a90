"""Issue 35 §2: after a successful pull, a bare `cce knowledge pull` refreshes what is
installed from where it came (like `git pull` with an upstream), and `--corpus` alone
works. Flags and config still win, and a disagreement says which one was used. Real
`cce` processes against real bare caches over file:// (LFS on)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.helpers.pulled import Pulled, cce, publish, publish_and_pull
from tests.helpers.sync import make_bare

pytestmark = pytest.mark.slow


@pytest.fixture
def pulled(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Pulled:
    monkeypatch.setenv("CCE_HOME", str(tmp_path / "home"))
    return publish_and_pull(tmp_path)


def _snapshot(p: Pulled) -> str:
    return (p.consumer / ".cce" / "knowledge" / "current").read_text().strip()


def test_a_bare_pull_refreshes_the_installed_corpus_from_where_it_came(
    pulled: Pulled, tmp_path: Path
) -> None:
    cons = str(pulled.consumer)
    bare = cce("knowledge", "pull", "--dir", cons)
    assert bare.returncode == 0, bare.stderr
    assert bare.stdout.startswith("Up to date: corpus acme@")
    assert bare.stderr == ""
    # A new snapshot on the remote: the bare pull installs it.
    publish(tmp_path, pulled.url, "acme", ["r1", "r2", "r3"])
    before = _snapshot(pulled)
    bare = cce("knowledge", "pull", "--dir", cons)
    assert bare.returncode == 0, bare.stderr
    assert bare.stdout.startswith("Pulled corpus acme@")
    assert "records  : 3 " in bare.stdout
    assert _snapshot(pulled) != before
    # `--corpus` alone: the same corpus, from the same remote.
    again = cce("knowledge", "pull", "--corpus", "acme", "--dir", cons)
    assert again.returncode == 0, again.stderr
    assert again.stdout.startswith("Up to date: corpus acme@")
    # `status` names the remote the next bare pull uses.
    st = cce("knowledge", "status", "--dir", cons)
    assert pulled.url in st.stdout and "behind remote  : no" in st.stdout, st.stdout


def test_config_and_flags_win_and_say_so(pulled: Pulled, tmp_path: Path) -> None:
    cons = str(pulled.consumer)
    other = make_bare(tmp_path / "other.git")
    publish(tmp_path, other, "acme", ["o1", "o2", "o3", "o4"], name="other")
    (pulled.consumer / ".cce").mkdir(exist_ok=True)
    (pulled.consumer / ".cce" / "config").write_text(
        f"knowledge:\n  sync:\n    remote: {other}\n", encoding="utf-8"
    )
    p = cce("knowledge", "pull", "--dir", cons)
    assert p.returncode == 0, p.stderr
    assert "records  : 4 " in p.stdout
    assert p.stderr.startswith(
        f"note: pulling from {other} (knowledge.sync.remote in .cce/config), not "
        f"{pulled.url} (where the installed corpus was pulled from, pulled-from.json): "
        "the config wins\n"
    )
    # The flag wins over the config, and says so.
    p = cce("knowledge", "pull", "--remote", pulled.url, "--dir", cons)
    assert p.returncode == 0, p.stderr
    assert "records  : 2 " in p.stdout
    assert (
        f"note: pulling from {pulled.url} (--remote), not {other} "
        "(knowledge.sync.remote in .cce/config): a flag wins\n"
    ) in p.stderr
    # The config's corpus over the installed one: said; a --corpus over it is not (the
    # marker guard names both corpora and asks for --force).
    (pulled.consumer / ".cce" / "config").write_text(
        "knowledge:\n  sync:\n    corpus_id: beta\n", encoding="utf-8"
    )
    p = cce("knowledge", "pull", "--remote", pulled.url, "--dir", cons)
    assert p.returncode == 1
    assert p.stderr.startswith(
        "note: pulling corpus beta (knowledge.sync.corpus_id in .cce/config), not acme "
        "(the installed store, synced.json): the config wins\n"
    )
    p = cce("knowledge", "pull", "--corpus", "other", "--remote", pulled.url, "--dir", cons)
    assert p.returncode == 1
    assert p.stderr.startswith(
        "note: pulling corpus other (--corpus), not beta (knowledge.sync.corpus_id in "
        ".cce/config): a flag wins\n"
    )
    assert "synced.json" not in p.stderr


def test_nothing_installed_still_asks_for_a_corpus_and_a_remote(tmp_path: Path) -> None:
    fresh = tmp_path / "fresh"
    fresh.mkdir()
    p = cce("knowledge", "pull", "--dir", str(fresh))
    assert p.returncode == 1
    assert "cannot determine corpus_id: pass --corpus <id>" in p.stderr


def test_a_tampered_marker_names_no_corpus(pulled: Pulled) -> None:
    marker = pulled.consumer / ".cce" / "knowledge" / "synced.json"
    marker.write_text(marker.read_text().replace('"acme"', '"../acme"'))
    p = cce("knowledge", "pull", "--dir", str(pulled.consumer))
    assert p.returncode == 1
    assert "cannot determine corpus_id" in p.stderr and "../acme" not in p.stderr
