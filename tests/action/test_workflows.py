"""Static checks on action.yml, the reusable workflow, the ready-to-copy callers and
the pre-commit hook: security posture (zizmor, no expression in scripts, least
privilege), the documented interface, and the docs that must describe it."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

from cce_knowledge.action import driver as action_driver
from cce_knowledge.cli import action_cmds
from tests.helpers.paths import REPO

ROOT = REPO
ACTION = ROOT / "action.yml"
REUSABLE = ROOT / ".github" / "workflows" / "cce-knowledge-build.yml"
CALLERS = sorted((ROOT / "workflows").glob("*.yml"))
ALL_WORKFLOWS = [
    *sorted((ROOT / ".github" / "workflows").glob("*.yml")),
    *CALLERS,
    *sorted((ROOT / "tests" / "act" / "workflows").glob("*.yml")),
]
EXPECTED_INPUTS = {
    "feed",
    "manifest",
    "extract",
    "corpus",
    "remote",
    "cache-token",
    "source-token",
    "retention",
    "dry-run",
    "force",
    "ask-suite",
    "working-directory",
}
EXPECTED_OUTPUTS = {
    "snapshot",
    "records",
    "chunks",
    "added",
    "removed",
    "changed",
    "published",
    "artifact-key",
}


class _Loader(yaml.SafeLoader):
    """YAML 1.2 booleans only (as GitHub reads workflows): `on:` stays a string key."""


_BOOL12 = re.compile(r"^(?:true|True|TRUE|false|False|FALSE)$")
_Loader.yaml_implicit_resolvers = {
    k: [(tag, _BOOL12 if tag == "tag:yaml.org,2002:bool" else rx) for tag, rx in v]
    for k, v in yaml.SafeLoader.yaml_implicit_resolvers.items()
}


def _load(p: Path) -> Any:
    return yaml.load(p.read_text(encoding="utf-8"), Loader=_Loader)


def _run_scripts(doc: Any) -> list[str]:
    """Every `run:` script anywhere in a workflow or action."""
    found: list[str] = []

    def walk(node: Any) -> None:
        if isinstance(node, dict):
            for k, v in node.items():
                if k == "run" and isinstance(v, str):
                    found.append(v)
                else:
                    walk(v)
        elif isinstance(node, list):
            for v in node:
                walk(v)

    walk(doc)
    return found


def test_action_inputs_outputs_match_the_interface() -> None:
    doc = _load(ACTION)
    assert doc["runs"]["using"] == "composite"
    assert set(doc["inputs"]) == EXPECTED_INPUTS
    assert set(doc["outputs"]) == EXPECTED_OUTPUTS
    for name, spec in doc["inputs"].items():
        assert spec.get("description"), name
        assert "default" in spec, f"input {name} has no documented default"
    assert doc["inputs"]["dry-run"]["default"] == "false"
    assert doc["inputs"]["force"]["default"] == "false"
    # The driver reads exactly these inputs and writes exactly these outputs.
    assert set(action_cmds.INPUTS) == EXPECTED_INPUTS
    assert set(action_cmds.OUTPUTS) == EXPECTED_OUTPUTS
    for name, spec in doc["outputs"].items():
        assert spec["value"] == f"${{{{ steps.run.outputs.{name} }}}}"


def test_action_passes_every_input_through_env_only() -> None:
    doc = _load(ACTION)
    steps = doc["runs"]["steps"]
    run_step = next(s for s in steps if s.get("id") == "run")
    for name in EXPECTED_INPUTS:
        assert run_step["env"][action_driver.env_name(name)] == f"${{{{ inputs.{name} }}}}"
    for script in _run_scripts(doc):
        assert "${{" not in script, f"expression inside a script: {script!r}"


@pytest.mark.parametrize("path", ALL_WORKFLOWS, ids=lambda p: p.name)
def test_no_expression_is_spliced_into_a_script(path: Path) -> None:
    for script in _run_scripts(_load(path)):
        assert "${{" not in script, f"{path.name}: expression inside run: {script!r}"


@pytest.mark.parametrize("path", ALL_WORKFLOWS, ids=lambda p: p.name)
def test_workflows_default_to_read_only_permissions(path: Path) -> None:
    doc = _load(path)
    assert doc.get("permissions") == {"contents": "read"}, path.name
    for name, job in doc["jobs"].items():
        perms = job.get("permissions")
        assert perms in (None, {"contents": "read"}), f"{path.name}:{name} asks for {perms}"


@pytest.mark.parametrize("path", ALL_WORKFLOWS, ids=lambda p: p.name)
def test_feed_is_never_uploaded_or_cached(path: Path) -> None:
    text = path.read_text()
    assert "upload-artifact" not in text and "actions/cache" not in text


def test_reusable_workflow_shape() -> None:
    doc = _load(REUSABLE)
    call = doc["on"]["workflow_call"]
    assert {"corpus", "extract", "remote", "retention", "ask-suite", "dry-run"} <= set(
        call["inputs"]
    )
    assert set(call["secrets"]) == {"source-token", "cache-token"}
    assert doc["concurrency"] == {
        "group": "cce-knowledge-${{ inputs.corpus }}",
        "cancel-in-progress": False,
    }
    steps = doc["jobs"]["build"]["steps"]
    checkout = next(s for s in steps if str(s.get("uses", "")).startswith("actions/checkout@"))
    assert re.fullmatch(r"actions/checkout@[0-9a-f]{40}", checkout["uses"]), (
        "third-party actions are SHA-pinned"
    )
    assert checkout["with"]["persist-credentials"] is False
    kb = next(s for s in steps if s.get("id") == "kb")
    assert kb["uses"].startswith("cce-knowledge/cce-knowledge@")
    # Each secret goes to the Action input that hands it to one child process only.
    assert kb["with"]["source-token"] == "${{ secrets.source-token }}"
    assert kb["with"]["cache-token"] == "${{ secrets.cache-token }}"
    assert "secrets.cache-token" not in json.dumps(steps[0])


def test_callers() -> None:
    names = {p.name for p in CALLERS}
    assert {"nightly-builder.yml", "validate-feed.yml", "consumer-refresh.yml"} <= names
    nightly = _load(ROOT / "workflows" / "nightly-builder.yml")
    assert "schedule" in nightly["on"] and "workflow_dispatch" in nightly["on"]
    job = nightly["jobs"]["corpus"]
    assert job["uses"].startswith(
        "cce-knowledge/cce-knowledge/.github/workflows/cce-knowledge-build.yml@"
    )
    assert set(job["secrets"]) == {"source-token", "cache-token"}
    validate = _load(ROOT / "workflows" / "validate-feed.yml")
    assert "pull_request" in validate["on"]
    scripts = "\n".join(_run_scripts(validate))
    assert "cce knowledge validate" in scripts and "check-jsonschema" in scripts


def test_pre_commit_hook() -> None:
    hooks = _load(ROOT / ".pre-commit-hooks.yaml")
    hook = next(h for h in hooks if h["id"] == "cce-validate-feed")
    assert hook["entry"] == "cce knowledge validate"
    assert hook["language"] == "python"
    assert re.search(hook["files"], "feeds/issues.jsonl")
    assert not re.search(hook["files"], "feeds/issues.json")


def test_zizmor_reports_nothing_medium_or_higher() -> None:
    zizmor = shutil.which("zizmor")
    if zizmor is None:
        pytest.skip("zizmor is not installed (dev extra)")
    targets = [".", *[str(p.relative_to(ROOT)) for p in CALLERS]]
    p = subprocess.run(
        [zizmor, "--offline", "--format", "json", "--no-progress", *targets],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=False,
        timeout=120,
    )
    assert p.returncode in (0, 10, 11, 12, 13, 14), p.stderr  # 1x = findings of some severity
    findings = json.loads(p.stdout or "[]")
    audited = re.findall(r"completed (\S+)", p.stderr)
    assert any("cce-knowledge-build.yml" in a for a in audited) and any(
        a.endswith("action.yml") for a in audited
    )
    bad = [
        (f["ident"], f["determinations"]["severity"], f["locations"][0]["symbolic"]["key"])
        for f in findings
        if f["determinations"]["severity"] in ("Medium", "High")
    ]
    assert bad == []


def test_actionlint_if_available() -> None:
    """Optional: actionlint (binary) — not installable offline here, so skipped when absent."""
    exe = shutil.which("actionlint")
    if exe is None:
        pytest.skip("actionlint is not on PATH")
    p = subprocess.run(
        [exe, "-no-color", *[str(p) for p in ALL_WORKFLOWS]],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=False,
    )
    assert p.returncode == 0, p.stdout + p.stderr


def _doc(name: str) -> str:
    return (ROOT / "docs" / name).read_text(encoding="utf-8")


def test_action_doc_covers_every_input_and_output() -> None:
    text = _doc("action.md")
    for name in EXPECTED_INPUTS | EXPECTED_OUTPUTS:
        assert f"`{name}`" in text, f"docs/action.md does not describe `{name}`"


def test_reusable_workflow_doc_covers_its_inputs_and_secrets() -> None:
    text = _doc("reusable-workflow.md")
    call = _load(REUSABLE)["on"]["workflow_call"]
    for name in [*call["inputs"], *call["secrets"], *call["outputs"]]:
        assert f"`{name}`" in text, f"docs/reusable-workflow.md does not describe `{name}`"


def test_other_docs_exist() -> None:
    assert "v2" in _doc("versioning.md") and "SHA" in _doc("versioning.md")
    guide = _doc("guides/github-issues-to-corpus.md")
    assert "cce knowledge pull" in guide and "extract github" in guide


def test_action_doc_embeds_the_driver_help(monkeypatch: pytest.MonkeyPatch) -> None:
    from cce_knowledge.cli.main import build_parser

    monkeypatch.setenv("COLUMNS", "100")  # argparse wraps to the terminal: pin it
    parser = build_parser()
    sub = next(a for a in parser._actions if a.__class__.__name__ == "_SubParsersAction")
    action = sub.choices["action"]
    asub = next(a for a in action._actions if a.__class__.__name__ == "_SubParsersAction")
    help_text = asub.choices["run"].format_help().rstrip("\n")
    assert help_text in _doc("action.md"), (
        "docs/action.md: refresh the `cce action run --help` block"
    )


def test_zizmor_auditor_finds_no_secret_outside_an_environment() -> None:
    """At the auditor persona every job that reads a secret names a dedicated
    environment (issue 12: consumer-refresh.yml read its cache token at job level)."""
    zizmor = shutil.which("zizmor")
    if zizmor is None:
        pytest.skip("zizmor is not installed (dev extra)")
    targets = [".", *[str(p.relative_to(ROOT)) for p in CALLERS]]
    p = subprocess.run(
        [
            zizmor,
            "--offline",
            "--persona",
            "auditor",
            "--format",
            "json",
            "--no-progress",
            *targets,
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=False,
        timeout=120,
    )
    assert p.returncode in (0, 10, 11, 12, 13, 14), p.stderr
    audited = re.findall(r"completed (\S+)", p.stderr)
    assert any(a.endswith("consumer-refresh.yml") for a in audited), p.stderr
    outside = [
        f["locations"][0]["symbolic"]["key"]
        for f in json.loads(p.stdout or "[]")
        if f["ident"] == "secrets-outside-env"
    ]
    assert outside == []
    refresh = _load(ROOT / "workflows" / "consumer-refresh.yml")
    assert refresh["jobs"]["refresh"]["environment"] == "knowledge-cache"
