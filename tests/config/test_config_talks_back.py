"""Issue 21 §4: a `.cce/config` that talks back, seen through real `cce` processes.

An unknown key warns (its line, the closest known key) and is still tolerated; a bad
value of a key a command uses refuses that command with exit 2, in the CLI exactly as
in the Action; `doctor` lists config problems under `config`; `validate` checks the file
against schemas/cce.config.schema.json.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from tests.helpers.cce_proc import run_cce
from tests.helpers.sync import feed, make_bare, refs

TYPO_RANKING = "knowledge:\n  rankng: hybrid\n"
TYPO_RETENTION = "knowledge:\n  sync:\n    corpus_id: c1\n    retention: keep-last-ten\n"
RETENTION_WHY = (
    "knowledge.sync.retention: 'keep-last-ten' is not a retention policy; "
    "allowed: `all` or `keep-last-<n>` (e.g. `keep-last-10`)"
)


def _env(tmp: Path, **extra: str) -> dict[str, str]:
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("CCE_", "GITHUB_")) and k not in ("NO_COLOR",)
    }
    env["CCE_HOME"] = str(tmp / "home")
    env.update(extra)
    return env


def cce(root: Path, *args: str, **env: str) -> subprocess.CompletedProcess[str]:
    return run_cce(*args, cwd=root, env=_env(root, **env))


def project(tmp: Path, config: str, *, indexed: bool = True) -> Path:
    root = tmp / "proj"
    (root / ".cce").mkdir(parents=True)
    (root / ".cce" / "config").write_text(config, encoding="utf-8")
    if indexed:
        (root / "feed.jsonl").write_bytes(feed([("kn:1", "alpha beta gamma"), "kn:2"]))
        p = cce(root, "knowledge", "index", "feed.jsonl", "-q")
        assert p.returncode == 0, p.stderr
    return root


def test_an_unknown_key_warns_with_its_line_and_the_closest_key(tmp_path: Path) -> None:
    root = project(tmp_path, TYPO_RANKING)
    p = cce(root, "knowledge", "search", "alpha")
    assert p.returncode == 0, p.stderr  # tolerated, as the reference tolerates it
    assert p.stderr.count("unknown key") == 1
    assert (
        "warning: .cce/config:2: unknown key `knowledge.rankng` is ignored — "
        "did you mean `ranking`?\n"
    ) in p.stderr
    assert "kn:1" in p.stdout


def test_reference_only_blocks_and_known_keys_are_quiet(tmp_path: Path) -> None:
    root = project(
        tmp_path,
        "knowledge:\n  ranking: default\n  sync:\n    retention: keep-last-3\n"
        "retrieval:\n  detail: full\noutput:\n  level: max\nmarkdown:\n  max_section_tokens: 300\n",
    )
    p = cce(root, "knowledge", "search", "alpha")
    assert p.returncode == 0 and "warning" not in p.stderr, p.stderr


def test_an_unknown_top_level_block_names_the_known_ones(tmp_path: Path) -> None:
    root = project(tmp_path, "knowlege:\n  ranking: hybrid\nzzz: 1\n")
    p = cce(root, "knowledge", "search", "alpha")
    assert p.returncode == 0
    assert (
        ".cce/config:1: unknown key `knowlege` is ignored — did you mean `knowledge`?" in p.stderr
    )
    assert (
        ".cce/config:3: unknown key `zzz` is ignored (known here: knowledge, markdown, sync)"
        in (p.stderr)
    )


def test_a_bad_retention_refuses_push_with_exit_2_and_publishes_nothing(tmp_path: Path) -> None:
    root = project(tmp_path, TYPO_RETENTION)
    bare = tmp_path / "cache.git"
    url = make_bare(bare)
    before = refs(bare)
    for extra in ([], ["--dry-run"]):
        p = cce(root, "knowledge", "push", "--remote", url, "--no-lfs", *extra)
        assert p.returncode == 2, p.stderr
        assert p.stderr == f"error: .cce/config:4: {RETENTION_WHY}\n"
    assert refs(bare) == before
    # Fixed, the same push publishes.
    (root / ".cce" / "config").write_text(TYPO_RETENTION.replace("keep-last-ten", "keep-last-10"))
    p = cce(root, "knowledge", "push", "--remote", url, "--no-lfs")
    assert p.returncode == 0, p.stderr
    assert refs(bare) != before


def test_a_bad_ranking_value_refuses_search_with_exit_2(tmp_path: Path) -> None:
    root = project(tmp_path, "knowledge:\n  ranking: fancy\n")
    p = cce(root, "knowledge", "search", "alpha")
    assert p.returncode == 2
    assert p.stderr == (
        "error: .cce/config:2: knowledge.ranking: 'fancy' is not a ranking; "
        "allowed: default, reference, hybrid\n"
    )
    # A flag decides without reading the key.
    assert cce(root, "knowledge", "search", "alpha", "--ranking", "default").returncode == 0


def _driver(root: Path, **inputs: str) -> subprocess.CompletedProcess[str]:
    env = _env(root)
    env["GITHUB_OUTPUT"] = str(root / "out")
    env["GITHUB_STEP_SUMMARY"] = str(root / "summary.md")
    for k, v in inputs.items():
        env["CCE_IN_" + k.upper()] = v
    return run_cce("action", "run", cwd=root, env=env)


def test_the_action_says_what_the_cli_says(tmp_path: Path) -> None:
    root = project(tmp_path, TYPO_RETENTION)
    url = make_bare(tmp_path / "cache.git")
    cli = cce(root, "knowledge", "push", "--remote", url, "--no-lfs")
    assert cli.returncode == 2
    # The config key, read by the Action's push: the CLI's own words.
    p = _driver(root, feed="feed.jsonl", remote=url)
    assert p.returncode == 1
    assert cli.stderr.strip().removeprefix("error: ") in p.stderr
    assert refs(tmp_path / "cache.git") == ""
    # The Action's `retention` input: the same words after the input's name.
    p = _driver(root, feed="feed.jsonl", remote=url, retention="keep-last-ten")
    assert p.returncode == 1
    why = RETENTION_WHY.removeprefix("knowledge.sync.retention: ")
    assert f"input `retention`: {why}" in p.stderr


def test_doctor_reports_config_problems_under_config(tmp_path: Path) -> None:
    root = project(tmp_path, TYPO_RANKING + "  sync:\n    retention: keep-last-ten\n")
    p = cce(root, "doctor")
    assert p.returncode == 0, p.stderr
    lines = p.stdout.splitlines()
    assert lines[1] == "config:"
    assert lines[2] == (
        "  advisory  .cce/config:2: unknown key `knowledge.rankng` is ignored — "
        "did you mean `ranking`?"
    )
    assert lines[3].startswith(f"  advisory  .cce/config:4: {RETENTION_WHY} — ")
    assert lines[4] == "knowledge:"
    assert lines[-1].endswith("2 advisories")
    assert p.stderr == ""  # said once, in the report


def test_doctor_files_a_yaml_error_under_config_not_semantic(tmp_path: Path) -> None:
    root = project(tmp_path, "")
    (root / ".cce" / "config").write_text("knowledge: [\n")
    p = cce(root, "doctor")
    assert p.returncode == 0
    lines = p.stdout.splitlines()
    assert lines[1] == "config:"
    assert lines[2].startswith("  advisory  .cce/config: not valid YAML (line 2, column 1: ")
    assert not any("semantic" in ln for ln in lines)


@pytest.mark.parametrize("kind", [[], ["--kind", "config"]])
def test_validate_checks_the_config_against_its_schema(tmp_path: Path, kind: list[str]) -> None:
    root = project(
        tmp_path,
        TYPO_RANKING + "  enabled: yes\n  sync:\n    retention: keep-last-ten\n",
        indexed=False,
    )
    p = cce(root, "knowledge", "validate", *kind, ".cce/config")
    assert p.returncode == 1
    assert p.stdout.splitlines() == [
        ".cce/config:2: $.knowledge.rankng: unknown key `knowledge.rankng` is ignored — "
        "did you mean `ranking`?",
        ".cce/config:3: $.knowledge.enabled: 'yes' is not of type 'boolean'",
        f".cce/config:5: $.knowledge.sync.retention: {RETENTION_WHY.split(': ', 1)[1]}",
    ]
    (root / ".cce" / "config").write_text("knowledge:\n  ranking: hybrid\n")
    p = cce(root, "knowledge", "validate", ".cce/config")
    assert p.returncode == 0, p.stdout
    assert p.stdout == ".cce/config: ok — project settings (cce.config)\n"


def test_mcp_search_refuses_a_bad_ranking_as_the_cli_does(tmp_path: Path) -> None:
    from cce_knowledge.mcp.tools import KnowledgeTools

    root = project(tmp_path, "knowledge:\n  ranking: fancy\n")
    cli = cce(root, "knowledge", "search", "alpha")
    out = KnowledgeTools(root).call("context_search", {"query": "alpha"})
    assert out.is_error
    why = cli.stderr.strip().removeprefix("error: ").removeprefix(".cce/config")
    assert out.text.startswith("context_search: ") and out.text.endswith(why)
