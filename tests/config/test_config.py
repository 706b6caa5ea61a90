"""`.cce/config` tolerance rules (docs/spec/core.md §10.1, docs/spec/sync.md §3.4)."""

from __future__ import annotations

import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

import pytest
import yaml
from jsonschema import Draft202012Validator

from cce_knowledge.cli.main import main
from cce_knowledge.config import settings as settings_mod
from cce_knowledge.config.reader import parse_retention, to_python
from cce_knowledge.config.schema import SCHEMA_FILE, config_json_schema, config_schema_text
from cce_knowledge.config.settings import KnowledgeSettings, load_settings
from cce_knowledge.config.validate import validate_value
from cce_knowledge.core.errors import ConfigError
from tests.helpers.paths import REPO
from tests.helpers.sync import feed, index
from tests.helpers.sync_env import SyncEnv


def write(root: Path, text: str) -> Path:
    (root / ".cce").mkdir(exist_ok=True)
    (root / ".cce" / "config").write_text(text, encoding="utf-8")
    return root


def test_missing_file_gives_defaults(tmp_path: Path) -> None:
    settings = load_settings(tmp_path)
    assert settings.markdown.max_section_tokens == 400
    assert settings.knowledge == KnowledgeSettings(True, 0.30, "both")


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
    assert load_settings(write(tmp_path, yaml_text)).markdown.max_section_tokens == expected


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
    cfg = load_settings(write(tmp_path, yaml_text)).knowledge
    assert (cfg.enabled, cfg.min_score, cfg.default_source) == (enabled, min_score, source)


def test_blocks_are_independent(tmp_path: Path) -> None:
    root = write(tmp_path, "markdown:\n  max_section_tokens: nope\nknowledge:\n  enabled: false\n")
    assert load_settings(root).markdown.max_section_tokens == 400
    assert load_settings(root).knowledge.enabled is False


def test_extra_key_never_resets_reference_keys(tmp_path: Path) -> None:
    root = write(tmp_path, "knowledge:\n  enabled: false\n  ranking: reference\n")
    assert load_settings(root).knowledge.enabled is False
    assert load_settings(root).knowledge.ranking == "reference"


def test_knowledge_sync_scalars_keep_their_source_text(tmp_path: Path) -> None:
    root = write(
        tmp_path,
        "knowledge:\n  sync:\n    corpus_id: 0123\n    remote: ''\n    retention: keep-last-3\n",
    )
    cfg = load_settings(root).knowledge.sync
    assert cfg.corpus_id == "0123"  # PyYAML would say 83 (octal)
    assert cfg.remote is None  # empty string means unset
    assert parse_retention(cfg.retention) == 3


def test_knowledge_sync_any_error_gives_defaults(tmp_path: Path) -> None:
    root = write(tmp_path, "knowledge:\n  sync:\n    corpus_id: [a]\n")
    assert load_settings(root).knowledge.sync.corpus_id is None


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
    cfg = load_settings(proj).sync
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
    cfg = load_settings(root).sync
    assert cfg.remote is None
    err = capsys.readouterr().err
    assert "is malformed and was ignored" in err and "staying all-local" in err


def test_knowledge_sync_survives_a_bad_sibling(tmp_path: Path) -> None:
    # A type error elsewhere in `knowledge` resets enabled/min_score, but the reference
    # reads `knowledge.sync` on its own (docs/spec/sync.md §3.4): the corpus id stays.
    root = write(tmp_path, 'knowledge:\n  enabled: "no"\n  sync:\n    corpus_id: c1\n')
    k = load_settings(root).knowledge
    assert k.enabled is True and k.sync.corpus_id == "c1"


def test_bad_ranking_is_kept_naming_file_line_and_key(tmp_path: Path) -> None:
    # Issue 21 §4: a bad value never resets the block, and the commands that rank
    # refuse it (exit 2) rather than silently using the default ranking.
    root = write(tmp_path, "knowledge:\n  ranking: fancy\n  enabled: false\n")
    settings = load_settings(root)
    assert settings.knowledge.ranking is None and settings.knowledge.enabled is False
    assert settings.knowledge.ranking_problem == (
        f"{root / '.cce' / 'config'}:2: knowledge.ranking: 'fancy' is not a ranking; "
        "allowed: default, reference, hybrid"
    )
    assert settings.problems == (settings.knowledge.ranking_problem,)


def test_bad_ranking_and_provider_messages_list_the_choices(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    root = write(
        tmp_path, "knowledge:\n  ranking: fancy\n  semantic:\n    provider: bing\n    model: m\n"
    )
    k = load_settings(root, env={}).knowledge
    assert (k.ranking_problem or "").endswith(
        "knowledge.ranking: 'fancy' is not a ranking; allowed: default, reference, hybrid"
    )
    with pytest.raises(ConfigError) as e:
        k.semantic_config()
    assert e.value.message.endswith(
        "knowledge.semantic.provider: 'bing' is not a provider (expected ollama or openai)"
    )


def test_missing_file_needs_no_yaml_parser(tmp_path: Path) -> None:
    # A cold `cce knowledge search` without a config file must not pay for PyYAML.
    code = (
        "import sys; from cce_knowledge.config.settings import load_settings;"
        f"load_settings({str(tmp_path)!r}); print('yaml' in sys.modules, 'pydantic' in sys.modules)"
    )
    env = {"PATH": "/usr/bin:/bin", "CCE_HOME": str(tmp_path / "home")}
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env)
    assert r.returncode == 0, r.stderr
    assert r.stdout.split() == ["False", "False"]


def test_push_reads_the_config_once(sync_env: SyncEnv, monkeypatch: pytest.MonkeyPatch) -> None:
    root = sync_env.root("proj")
    write(root, f"knowledge:\n  sync:\n    corpus_id: c1\n    remote: {sync_env.url}\n")
    index(root, feed(["alpha beta", "gamma delta"]))
    reads: list[Path] = []
    real = settings_mod.load_document

    def counting(path: Path) -> object:
        reads.append(path)
        return real(path)

    monkeypatch.setattr(settings_mod, "load_document", counting)
    # The whole command: the edge loads the settings and hands them down.
    assert main(["knowledge", "push", "--dir", str(root)]) == 0
    # The project file once; the global file (for an unset sync.remote) once.
    assert reads == [root / ".cce" / "config", sync_env.tmp / "home-a" / "config.yml"]


# ------------------------------------------------------------ our strict blocks


@dataclass(frozen=True)
class _Endpoint:
    provider: Literal["ollama", "openai"] = "ollama"
    url: str | None = None
    dims: int = 8


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ({"provider": "bing"}, "knowledge.x.provider: Input should be 'ollama' or 'openai'"),
        ({"url": 3}, "knowledge.x.url: Input should be a valid string"),
        ({"dims": "8"}, "knowledge.x.dims: Input should be a valid integer"),
        ({"modle": "m"}, "knowledge.x.modle: unknown key (expected provider, url, dims)"),
        ("ollama", "knowledge.x: expected a mapping of provider, url, dims"),
    ],
)
def test_strict_block_errors_name_the_file_and_key(value: object, message: str) -> None:
    with pytest.raises(ConfigError) as e:
        validate_value(value, _Endpoint, "/p/.cce/config: knowledge.x")
    assert e.value.message == f"/p/.cce/config: {message}"


@pytest.mark.parametrize(
    "form",
    [Literal["a"], Literal["extended", "reference"], Literal["a", "b", "c"], Literal["it's", "x"]],
)
@pytest.mark.parametrize("value", ["z", "A", "", 1, 1.5, True, None, ["a"], {"a": 1}, "a", "x"])
def test_literal_checked_by_hand_as_pydantic_checks_it(form: object, value: object) -> None:
    """A string Literal is checked without importing pydantic (every command reads
    knowledge.redaction); the answer and the message are pydantic's, word for word."""
    from pydantic import ConfigDict, TypeAdapter, ValidationError

    try:
        want: object = TypeAdapter(form, config=ConfigDict(strict=True)).validate_python(value)
    except ValidationError as e:
        want = f"k: {e.errors(include_url=False, include_input=False)[0]['msg']}"
    try:
        got: object = validate_value(value, form, "k")
    except ConfigError as e:
        got = e.message
    assert got == want


def test_a_literal_setting_does_not_import_pydantic(tmp_path: Path) -> None:
    write(tmp_path, "knowledge:\n  redaction: reference\n")
    code = (
        "import sys; from cce_knowledge.config.settings import load_settings; "
        f"s = load_settings({str(tmp_path)!r}); "
        "print(s.knowledge.redaction, 'pydantic' in sys.modules)"
    )
    env = {**os.environ, "CCE_HOME": str(tmp_path / "home")}
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO, env=env
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["reference", "False"]


def test_strict_block_values(tmp_path: Path) -> None:
    got = validate_value({"provider": "openai", "dims": 4}, _Endpoint, "k")
    assert got == _Endpoint("openai", None, 4)
    assert validate_value("extended", Literal["extended", "reference"], "k") == "extended"


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("a: 1", {"a": 1}),
        ("a: '1'", {"a": "1"}),
        ("a: yes", {"a": "yes"}),  # YAML 1.1 booleans are strings
        ("a: true", {"a": True}),
        ("a: -0x10", {"a": -16}),
        ("a: 1.5e3", {"a": 1500.0}),
        ("a: ~", {"a": None}),
        ("a: [x, 2]", {"a": ["x", 2]}),
    ],
)
def test_to_python_types_scalars_as_serde_yaml(text: str, expected: object) -> None:
    assert to_python(yaml.compose(text, Loader=yaml.SafeLoader)) == expected


def test_published_schema_is_in_step_with_the_settings() -> None:
    published = (REPO / "schemas" / SCHEMA_FILE).read_text(encoding="utf-8")
    assert published == config_schema_text(), "run: python tools/gen_config_schema.py"


def test_schema_accepts_a_full_config_and_rejects_a_wrong_enum() -> None:
    validator = Draft202012Validator(config_json_schema())
    good = {
        "markdown": {"max_section_tokens": 300},
        "knowledge": {
            "enabled": True,
            "min_score": 0.2,
            "default_source": "knowledge",
            "ranking": "reference",
            "sync": {"corpus_id": "c", "remote": "file:///x.git", "retention": "keep-last-3"},
        },
        "sync": {"remote": "file:///x.git", "lfs": False, "repo_id": "o/n", "auto_pull": False},
        "code": {"anything": 1},  # unknown blocks are ignored, as the engine does
    }
    assert list(validator.iter_errors(good)) == []
    bad = {"knowledge": {"default_source": "all"}}
    assert [e.json_path for e in validator.iter_errors(bad)] == ["$.knowledge.default_source"]
