"""A committed `.cce/config` that would hang or crash every command (issue 25 point 7):
refused as a config error naming the file, exit 2, at once."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import cce_knowledge
from cce_knowledge.config.reader import (
    MAX_DEPTH,
    MAX_EXPANDED_NODES,
    compose_text,
    to_python,
)
from cce_knowledge.config.settings import load_settings
from cce_knowledge.core.errors import ConfigRefused
from tests.helpers.cce_proc import run_cce
from tests.helpers.paths import TESTS

SRC = str(Path(cce_knowledge.__file__).resolve().parents[1])


def billion_laughs() -> str:
    """Nine levels of nine aliases each under `knowledge.redaction`: 10^9 nodes."""
    lines = [
        "knowledge:",
        "  redaction:",
        '    a: &a ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]',
    ]
    prev = "a"
    for name in "bcdefghi":
        lines.append(f"    {name}: &{name} [" + ",".join([f"*{prev}"] * 9) + "]")
        prev = name
    return "\n".join(lines) + "\n"


HOSTILE = {
    "alias bomb": billion_laughs(),
    "5000 nested [": "knowledge:\n  redaction: " + "[" * 5000 + "]" * 5000 + "\n",
    "5000-digit number": "markdown:\n  max_section_tokens: " + "9" * 5000 + "\n",
}


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(HOSTILE))
def test_a_hostile_config_is_refused_at_once(tmp_path: Path, name: str) -> None:
    assert len(HOSTILE["alias bomb"].encode()) < 500
    root = tmp_path / "root"
    (root / ".cce").mkdir(parents=True)
    (root / ".cce" / "config").write_text(HOSTILE[name])
    feed = TESTS / "vectors" / "knowledge" / "curated.jsonl"
    t0 = time.perf_counter()
    proc = run_cce(
        "knowledge", "index", str(feed), "--dir", str(root),
        timeout=60, env={**os.environ, "PYTHONPATH": SRC},
    )  # fmt: skip
    wall = time.perf_counter() - t0
    assert proc.returncode == 2, proc.stderr[-2000:]
    assert "Traceback" not in proc.stderr
    assert f"{root / '.cce' / 'config'}: refused:" in proc.stderr
    assert not (root / ".cce" / "knowledge").exists()  # nothing half-written
    assert wall < 20  # (interpreter start on a loaded machine; the refusal itself: ms)


@pytest.mark.parametrize("name", sorted(HOSTILE))
def test_the_reader_refuses_within_a_second(tmp_path: Path, name: str) -> None:
    (tmp_path / ".cce").mkdir()
    (tmp_path / ".cce" / "config").write_text(HOSTILE[name])
    t0 = time.perf_counter()
    with pytest.raises(ConfigRefused, match=r"\.cce/config: refused: line \d+: "):
        load_settings(tmp_path, warn=False)
    assert time.perf_counter() - t0 < 1.0


def test_anchors_and_aliases_within_the_limits_still_work() -> None:
    doc = compose_text("base: &b {x: 1, y: [1, 2]}\nmore: *b\nlist: [*b, *b]\n", "c")
    assert to_python(doc) == {
        "base": {"x": 1, "y": [1, 2]},
        "more": {"x": 1, "y": [1, 2]},
        "list": [{"x": 1, "y": [1, 2]}] * 2,
    }


def test_the_limits_are_exact() -> None:
    ok = "k: " + "[" * (MAX_DEPTH - 1) + "]" * (MAX_DEPTH - 1) + "\n"
    compose_text(ok, "c")
    with pytest.raises(ConfigRefused, match="nested deeper than 128"):
        compose_text("k: " + "[" * MAX_DEPTH + "]" * MAX_DEPTH + "\n", "c")
    with pytest.raises(ConfigRefused, match="brackets nested deeper than 512"):
        compose_text("k: " + "[" * 513 + "]" * 513 + "\n", "c")
    # A flat list of exactly the budget composes (the mapping, the key and the list
    # count too); one alias of it more does not.
    n = MAX_EXPANDED_NODES - 3
    compose_text("k: [" + ",".join(["1"] * n) + "]\n", "c")
    with pytest.raises(ConfigRefused, match="alias bomb"):
        compose_text("k: &a [" + ",".join(["1"] * n) + "]\nj: *a\n", "c")


@settings(max_examples=60, deadline=None)
@given(depth=st.integers(1, 400), fan=st.integers(1, 12), levels=st.integers(1, 9))
def test_nesting_and_aliases_compose_or_are_refused(depth: int, fan: int, levels: int) -> None:
    """Never a RecursionError, never a long expansion."""
    nest = "k: " + "[" * depth + "]" * depth + "\n"
    lines = ["a0: &a0 [x]"]
    for i in range(1, levels):
        lines.append(f"a{i}: &a{i} [" + ",".join([f"*a{i - 1}"] * fan) + "]")
    for text in (nest, "\n".join(lines) + "\n"):
        t0 = time.perf_counter()
        try:
            doc = compose_text(text, "c")
        except ConfigRefused:
            pass
        else:
            to_python(doc)
        assert time.perf_counter() - t0 < 5.0


def test_sync_init_refuses_to_edit_a_hostile_config() -> None:
    """`cce sync init` edits the file in place: it must not round-trip an alias bomb
    (or recurse through 5,000 brackets) either."""
    from cce_knowledge.sync.remote_setup import edit_config_text

    for text in HOSTILE.values():
        with pytest.raises(ConfigRefused):
            edit_config_text(text, "https://example.invalid/cache.git", True, None)
