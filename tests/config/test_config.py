"""`.cce/config` tolerance rules (docs/spec/core.md §10.1, docs/spec/sync.md §3.4)."""

from __future__ import annotations

from pathlib import Path

import pytest

from cce_knowledge.config.reader import (
    KnowledgeConfig,
    load_extra_knowledge_key,
    load_knowledge_config,
    load_knowledge_sync_config,
    load_markdown_config,
    load_sync_config,
    parse_retention,
)


def write(root: Path, text: str) -> Path:
    (root / ".cce").mkdir(exist_ok=True)
    (root / ".cce" / "config").write_text(text, encoding="utf-8")
    return root


def test_missing_file_gives_defaults(tmp_path: Path) -> None:
    assert load_markdown_config(tmp_path).max_section_tokens == 400
    assert load_knowledge_config(tmp_path) == KnowledgeConfig(True, 0.30, "both")


@pytest.mark.parametrize(
    ("yaml_text", "expected"),
    [
        ("markdown:\n  max_section_tokens: 120\n", 120),
        ("markdown:\n  max_section_tokens: 0\n", 400),  # 0 means the default
        ("markdown:\n  max_section_tokens: -1\n", 400),  # type error -> block defaults
        ("markdown:\n  max_section_tokens: 400.0\n", 400),
        ('markdown:\n  max_section_tokens: "120"\n', 400),  # quoted number is a string
        ("markdown:\n  max_section_tokens: ~\n", 400),
        ("markdown: [\n", 400),  # invalid YAML anywhere -> defaults
        ("markdown:\n  max_section_tokens: 0x20\n", 32),
    ],
)
def test_markdown_budget(tmp_path: Path, yaml_text: str, expected: int) -> None:
    assert load_markdown_config(write(tmp_path, yaml_text)).max_section_tokens == expected


@pytest.mark.parametrize(
    ("yaml_text", "enabled", "min_score", "source"),
    [
        ("knowledge:\n  enabled: false\n", False, 0.30, "both"),
        ("knowledge:\n  enabled: FALSE\n", False, 0.30, "both"),
        # YAML 1.1 booleans are strings in serde_yaml 0.9: a type error resets the block.
        ("knowledge:\n  enabled: no\n  min_score: 0.5\n", True, 0.30, "both"),
        ("knowledge:\n  enabled: off\n", True, 0.30, "both"),
        ('knowledge:\n  enabled: "false"\n', True, 0.30, "both"),
        # A bad sibling drops the whole block, `enabled: false` included.
        ('knowledge:\n  enabled: false\n  min_score: "high"\n', True, 0.30, "both"),
        ("knowledge:\n  min_score: 1\n", True, 1.0, "both"),
        ("knowledge:\n  min_score: +0.5\n", True, 0.5, "both"),
        ("knowledge:\n  min_score: .nan\n", True, 0.30, "both"),  # non-finite ignored
        ("knowledge:\n  min_score: .inf\n  enabled: false\n", False, 0.30, "both"),
        ("knowledge:\n  default_source: knowledge\n", True, 0.30, "knowledge"),
        ("knowledge:\n  default_source: Knowledge\n", True, 0.30, "both"),  # case-sensitive
        ("knowledge:\n  default_source: 1\n", True, 0.30, "both"),
        ("knowledge:\n  default_source: 'code'\n", True, 0.30, "code"),
    ],
)
def test_knowledge_block(
    tmp_path: Path, yaml_text: str, enabled: bool, min_score: float, source: str
) -> None:
    cfg = load_knowledge_config(write(tmp_path, yaml_text))
    assert (cfg.enabled, cfg.min_score, cfg.default_source) == (enabled, min_score, source)


def test_blocks_are_independent(tmp_path: Path) -> None:
    root = write(tmp_path, "markdown:\n  max_section_tokens: nope\nknowledge:\n  enabled: false\n")
    assert load_markdown_config(root).max_section_tokens == 400
    assert load_knowledge_config(root).enabled is False


def test_extra_key_never_resets_reference_keys(tmp_path: Path) -> None:
    root = write(tmp_path, "knowledge:\n  enabled: false\n  ranking: reference\n")
    assert load_knowledge_config(root).enabled is False
    assert load_extra_knowledge_key(root, "ranking") == "reference"
    assert load_extra_knowledge_key(root, "missing") is None


def test_knowledge_sync_scalars_keep_their_source_text(tmp_path: Path) -> None:
    root = write(
        tmp_path,
        "knowledge:\n  sync:\n    corpus_id: 0123\n    remote: ''\n    retention: keep-last-3\n",
    )
    cfg = load_knowledge_sync_config(root)
    assert cfg.corpus_id == "0123"  # PyYAML would say 83 (octal)
    assert cfg.remote is None  # empty string means unset
    assert parse_retention(cfg.retention) == 3


def test_knowledge_sync_any_error_gives_defaults(tmp_path: Path) -> None:
    root = write(tmp_path, "knowledge:\n  sync:\n    corpus_id: [a]\n")
    assert load_knowledge_sync_config(root).corpus_id is None


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("keep-last-2", 2),
        (" keep-last-02 ", 2),
        ("keep-last-+5", 5),
        ("keep-last-0", 0),
        ("keep-last-", None),
        ("keep-last-1_0", None),
        ("keep-last-٣", None),  # Unicode digits are not digits here
        ("all", None),
        ("keep_last_2", None),
        (None, None),
    ],
)
def test_retention_grammar(value: str | None, expected: int | None) -> None:
    assert parse_retention(value) == expected


def test_sync_config_inherits_global_remote(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    home = tmp_path / "home"
    home.mkdir()
    (home / "config.yml").write_text("sync:\n  remote: file:///global.git\n", encoding="utf-8")
    monkeypatch.setenv("CCE_HOME", str(home))
    proj = tmp_path / "proj"
    proj.mkdir()
    write(proj, "sync:\n  lfs: false\n")
    cfg = load_sync_config(proj)
    assert cfg.remote == "file:///global.git"
    assert cfg.lfs is False


def test_malformed_project_sync_config_warns_and_stays_local(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    home = tmp_path / "home"
    home.mkdir()
    (home / "config.yml").write_text("sync:\n  remote: file:///global.git\n", encoding="utf-8")
    monkeypatch.setenv("CCE_HOME", str(home))
    root = write(tmp_path, "sync:\n  remote: file:///x.git\n  lfs: yes\n")
    cfg = load_sync_config(root)
    assert cfg.remote is None
    err = capsys.readouterr().err
    assert "is malformed and was ignored" in err and "staying all-local" in err
