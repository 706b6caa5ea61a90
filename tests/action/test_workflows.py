"""Static checks on action.yml, the reusable workflow, the ready-to-copy callers and
the pre-commit hook: security posture (zizmor, no expression in scripts, least
privilege), the documented interface, and the docs that must describe it."""

from __future__ import annotations

import functools
import json
import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

from cce_knowledge.action import driver as action_driver
from cce_knowledge.action.interface import STEP_INPUTS, STEP_OUTPUTS
from cce_knowledge.cli import action_cmds
from tests.helpers.paths import REPO

ROOT = REPO
ACTION = ROOT / "action.yml"
SUB_ACTIONS = ("setup", "validate", "index", "guard", "push", "pull")
ALL_ACTIONS = [ACTION, *(ROOT / name / "action.yml" for name in SUB_ACTIONS)]
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
    "chunk-policy",
    "extract",
    "corpus",
    "remote",
    "cache-token",
    "source-token",
    "retention",
    "dry-run",
    "force",
    "ask-suite",
    "allow-empty",
    "incremental",
    "semantic-url",
    "semantic-model",
    "signing-key",
    "allowed-signers",
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


@pytest.mark.parametrize(
    "path", [*ALL_WORKFLOWS, *ALL_ACTIONS], ids=lambda p: str(p.relative_to(ROOT))
)
def test_no_expression_is_spliced_into_a_script(path: Path) -> None:
    for script in _run_scripts(_load(path)):
        assert "${{" not in script, f"{path.name}: expression inside run: {script!r}"


#: The only jobs that get more than `contents: read`, and exactly what they get.
ELEVATED_JOBS = {
    ("pr-diff-comment.yml", "comment"): {"pull-requests": "write"},
    ("release.yml", "pypi"): {"id-token": "write"},
    ("release.yml", "release"): {"contents": "write"},
}


@pytest.mark.parametrize("path", ALL_WORKFLOWS, ids=lambda p: p.name)
def test_workflows_default_to_read_only_permissions(path: Path) -> None:
    doc = _load(path)
    assert doc.get("permissions") == {"contents": "read"}, path.name
    for name, job in doc["jobs"].items():
        perms = job.get("permissions")
        allowed = ELEVATED_JOBS.get((path.name, name))
        if allowed is not None:
            assert perms == allowed, f"{path.name}:{name} asks for {perms}"
        else:
            assert perms in (None, {"contents": "read"}), f"{path.name}:{name} asks for {perms}"


@pytest.mark.parametrize(
    "path", [p for p in ALL_WORKFLOWS if p.name != "release.yml"], ids=lambda p: p.name
)
def test_feed_is_never_uploaded_or_cached(path: Path) -> None:
    """No workflow uploads anything, and one caches only the consumer's part store (the
    builder's chunk maps are cached by action.yml, under $RUNNER_TEMP): never a feed."""
    text = path.read_text()
    assert "upload-artifact" not in text
    doc = _load(path)
    for job in doc.get("jobs", {}).values():
        ids = {s.get("id"): s for s in job.get("steps", [])}
        for s in job.get("steps", []):
            if not str(s.get("uses", "")).startswith("actions/cache"):
                continue
            assert path.name == "consumer-refresh.yml", f"{path.name} caches {s}"
            assert s["with"]["path"] == "${{ steps.parts.outputs.dir }}"
            assert '"${CCE_HOME:-$HOME/.cce}/sync/parts"' in ids["parts"]["run"]
    assert "actions/cache" not in text or path.name == "consumer-refresh.yml"


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
    uses = [str(s.get("uses", "")) for s in validate["jobs"]["validate"]["steps"]]
    assert [u.split("@")[0] for u in uses if u.startswith("cce-knowledge/")] == [
        "cce-knowledge/cce-knowledge/setup",
        "cce-knowledge/cce-knowledge/validate",
    ]


@pytest.mark.parametrize("path", [*CALLERS, REUSABLE], ids=lambda p: p.name)
def test_callers_never_install_from_pypi_by_name(path: Path) -> None:
    text = path.read_text(encoding="utf-8")
    assert "pip install" not in text and "cce-knowledge==" not in text


def test_pre_commit_hook() -> None:
    hooks = _load(ROOT / ".pre-commit-hooks.yaml")
    hook = next(h for h in hooks if h["id"] == "cce-validate-feed")
    assert hook["entry"] == "cce knowledge validate"
    assert hook["language"] == "python"
    assert re.search(hook["files"], "feeds/issues.jsonl")
    assert not re.search(hook["files"], "feeds/issues.json")


def _zizmor_targets() -> list[str]:
    """Every action and workflow, named one by one (zizmor given the `workflows/`
    directory would look for `.github/workflows` under it and check nothing)."""
    files = [*ALL_ACTIONS, *sorted((ROOT / ".github" / "workflows").glob("*.yml")), *CALLERS]
    # Dependabot's configuration too (its `dependabot-cooldown` audit, issue 21 §7).
    files.append(ROOT / ".github" / "dependabot.yml")
    return [str(p.relative_to(ROOT)) for p in files]


@functools.cache
def _zizmor_auditor() -> tuple[frozenset[str], tuple[dict[str, Any], ...]]:
    """(files audited, findings not ignored inline) of zizmor at the auditor persona
    over every action and workflow, run once per session."""
    zizmor = shutil.which("zizmor")
    if zizmor is None:
        pytest.skip("zizmor is not installed (dev extra)")
    cmd = [zizmor, "--offline", "--persona", "auditor", "--format", "json", "--no-progress"]
    p = subprocess.run(
        [*cmd, *_zizmor_targets()],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=False,
        timeout=300,
    )
    assert p.returncode in (0, 10, 11, 12, 13, 14), p.stderr  # 1x = findings of some severity
    audited = frozenset(re.findall(r"completed (\S+)", p.stderr))
    findings = tuple(f for f in json.loads(p.stdout or "[]") if not f.get("ignored"))
    return audited, findings


def test_zizmor_auditor_finds_nothing_in_any_action_or_workflow() -> None:
    audited, findings = _zizmor_auditor()
    assert audited == set(_zizmor_targets()), set(_zizmor_targets()) ^ audited
    assert [(f["ident"], f["locations"][0]["symbolic"]["key"]) for f in findings] == []


@pytest.mark.parametrize("rel", _zizmor_targets())
def test_every_inline_zizmor_ignore_says_why(rel: str) -> None:
    for n, line in enumerate((ROOT / rel).read_text(encoding="utf-8").splitlines(), 1):
        m = re.search(r"#\s*zizmor:\s*ignore\[([^\]]+)\](.*)", line)
        if m:
            assert m[1] != "unpinned-uses", f"{rel}:{n}: pin it instead"
            assert len(m[2].strip()) >= 15, f"{rel}:{n}: an inline ignore carries its reason"


def test_shipped_pins_name_one_commit_with_a_version_comment() -> None:
    """Every use of this repository's actions or reusable workflow in the callers, the
    reusable workflow and the docs is pinned by the same SHA with a version comment
    (tools/pin_action.py moves them together at a release)."""
    from tools import pin_action

    found = [
        (p.relative_to(ROOT).as_posix(), *pin)
        for p in pin_action.files()
        for pin in pin_action.pins(p.read_text(encoding="utf-8"))
    ]
    assert {f[0] for f in found} >= {
        "workflows/validate-feed.yml",
        "workflows/consumer-refresh.yml",
        "workflows/nightly-builder.yml",
        "workflows/composed-pipeline.yml",
        "workflows/pr-diff-comment.yml",
        ".github/workflows/cce-knowledge-build.yml",
    }
    assert len({sha for _, _, sha, _ in found}) == 1, found
    assert all(comment for *_, comment in found), found
    for path in [*CALLERS, REUSABLE]:
        for line in path.read_text(encoding="utf-8").splitlines():
            if re.search(r"uses:\s*cce-knowledge/cce-knowledge", line):
                assert re.search(r"@[0-9a-f]{40} # \S", line), f"{path.name}: {line.strip()}"


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
    audited, findings = _zizmor_auditor()
    assert "workflows/consumer-refresh.yml" in audited
    assert [f for f in findings if f["ident"] == "secrets-outside-env"] == []
    refresh = _load(ROOT / "workflows" / "consumer-refresh.yml")
    assert refresh["jobs"]["refresh"]["environment"] == "knowledge-cache"


# ------------------------------------------------------------------ composable sub-actions


@pytest.mark.parametrize("step", [s for s in SUB_ACTIONS if s != "setup"])
def test_sub_action_matches_the_driver_interface(step: str) -> None:
    doc = _load(ROOT / step / "action.yml")
    assert doc["runs"]["using"] == "composite"
    assert tuple(doc["inputs"]) == STEP_INPUTS[step]
    assert tuple(doc["outputs"]) == STEP_OUTPUTS[step]
    for name, spec in doc["inputs"].items():
        assert spec.get("description") and "default" in spec, f"{step}: input {name}"
    for name, spec in doc["outputs"].items():
        assert spec.get("description"), f"{step}: output {name}"
        assert spec["value"] == f"${{{{ steps.run.outputs.{name} }}}}"
    steps = doc["runs"]["steps"]
    (run_step,) = [s for s in steps if s.get("id") == "run"]
    env = {k: v for k, v in run_step["env"].items() if k != ac_maps_env()}
    assert env == {action_driver.env_name(n): f"${{{{ inputs.{n} }}}}" for n in STEP_INPUTS[step]}
    assert run_step["run"] == f'bash "$GITHUB_ACTION_PATH/../setup/cce-step" {step}'
    # Only `index` has more: the chunk maps' cache around the driver step.
    if step == "index":
        assert_chunk_map_cache(steps)
    else:
        assert steps == [run_step]


def ac_maps_env() -> str:
    return action_driver.CHUNK_MAPS_ENV


def assert_chunk_map_cache(steps: list[dict[str, Any]]) -> None:
    """The chunk maps' actions/cache around the driver step (root action.yml, index/):
    restored before it, saved after it, under $RUNNER_TEMP (never the feed), keyed by
    corpus with a per-run key, skipped with `incremental: false`."""
    ids = [s.get("id") or s.get("uses", "").split("@")[0] for s in steps]
    at = ids.index("run")
    restore, save = steps[at - 1], steps[at + 1]
    assert restore["uses"].startswith("actions/cache/restore@")
    assert save["uses"].startswith("actions/cache/save@")
    assert steps[at - 2]["id"] == "maps"
    for s in (steps[at - 2], restore, save):
        assert s["if"].startswith("inputs.incremental != 'false'")
    assert restore["with"] == {
        "path": "${{ steps.maps.outputs.dir }}",
        "key": "${{ steps.maps.outputs.key }}",
        "restore-keys": "${{ steps.maps.outputs.prefix }}",
    }
    assert save["with"] == {
        "path": "${{ steps.maps.outputs.dir }}",
        "key": "${{ steps.maps.outputs.key }}",
    }
    script = steps[at - 2]["run"]
    assert '"$RUNNER_TEMP/cce-knowledge-chunk-maps"' in script
    assert 'prefix="cce-knowledge-chunk-maps-v1:${CORPUS:-default}:"' in script
    assert steps[at]["env"][action_driver.CHUNK_MAPS_ENV] == "${{ steps.maps.outputs.dir }}"


def test_setup_action_shape() -> None:
    doc = _load(ROOT / "setup" / "action.yml")
    assert set(doc["inputs"]) == {"python-version", "cache"}
    assert {"version", "python", "cache-hit"} <= set(doc["outputs"])
    for s in doc["runs"]["steps"]:
        if "uses" in s:
            assert re.fullmatch(r"[\w-]+/[\w./-]+@[0-9a-f]{40}", s["uses"]), s["uses"]
    scripts = "\n".join(_run_scripts(doc))
    assert '"$ACTION_PATH/install.py" key' in scripts
    assert '"$ACTION_PATH/install.py" install' in scripts
    assert '"$GITHUB_PATH"' in scripts


def test_root_action_installs_and_caches_like_setup() -> None:
    """The all-in-one Action composes the same pieces: setup's install script and
    cache steps, then the driver."""
    root = [s for s in _load(ACTION)["runs"]["steps"]]
    setup = _load(ROOT / "setup" / "action.yml")["runs"]["steps"]
    uses = lambda steps: [s["uses"] for s in steps if "uses" in s and "cache" in s["uses"]]  # noqa: E731
    at = [s.get("id") for s in root].index("maps")
    assert uses(root[:at]) == uses(setup)
    assert_chunk_map_cache(root)
    scripts = "\n".join(_run_scripts({"s": root}))
    assert '"$ACTION_PATH/setup/install.py" key' in scripts
    assert '"$ACTION_PATH/setup/install.py" install' in scripts
    assert "--system-site-packages" not in ACTION.read_text()


def _doc_section(text: str, heading: str) -> str:
    m = re.search(rf"^## {re.escape(heading)}\n(.*?)(?=^## |\Z)", text, re.M | re.S)
    assert m, f"docs/action.md has no `## {heading}` section"
    return m[1]


@pytest.mark.parametrize("step", SUB_ACTIONS)
def test_action_doc_covers_every_sub_action(step: str) -> None:
    section = _doc_section(_doc("action.md"), f"`{step}`")
    doc = _load(ROOT / step / "action.yml")
    for name in [*doc["inputs"], *doc["outputs"]]:
        assert f"`{name}`" in section, f"docs/action.md `{step}` does not describe `{name}`"
    for name, spec in doc["inputs"].items():
        if spec.get("default"):
            assert f"`{spec['default']}`" in section, f"`{step}`: default of `{name}`"
    assert f"cce-knowledge/cce-knowledge/{step}@" in section


# ------------------------------------------------------------------ docs that run


def _extract_examples() -> list[tuple[str, str]]:
    """(where, value) of every `extract:` example in the actions, workflows and docs,
    and of the adapter examples in the `extract` inputs' descriptions."""
    found: list[tuple[str, str]] = []
    yamls = [*ALL_ACTIONS, *sorted((ROOT / ".github" / "workflows").glob("*.yml")), *CALLERS]
    for path in yamls:
        rel = path.relative_to(ROOT).as_posix()
        text = path.read_text(encoding="utf-8")
        for m in re.finditer(r"^[ \t]*#?[ \t]*extract:[ \t]*(\S.*?)[ \t]*$", text, re.M):
            found.append((rel, m[1]))
        doc = _load(path)
        inputs = doc.get("inputs") or ((doc.get("on") or {}).get("workflow_call") or {}).get(
            "inputs"
        )
        inp = (inputs or {}).get("extract") or {}
        for m in re.finditer(r"`((?:github|docs|okf) [^`]*)`", str(inp.get("description", ""))):
            found.append((f"{rel} (extract description)", m[1]))
    for path in [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]:
        rel = path.relative_to(ROOT).as_posix()
        md_text = path.read_text(encoding="utf-8")
        for m in re.finditer(r"^[ \t]*extract:[ \t]*(\S.*?)[ \t]*$", md_text, re.M):
            found.append((rel, m[1]))
        for m in re.finditer(r"`extract: ((?:github|docs|okf) [^`]*)`", md_text):
            found.append((rel, m[1]))
    out = []
    for where, value in found:
        value = value.split(" #", 1)[0].strip().strip("\"'")
        if value and "${{" not in value and value not in (">-", "|"):
            out.append((where, value))
    return out


def test_there_are_extract_examples_to_check() -> None:
    wheres = {w.split(" ")[0] for w, _ in _extract_examples()}
    assert {"action.yml", "docs/action.md", "workflows/nightly-builder.yml"} <= wheres, wheres


@pytest.mark.parametrize("where,value", _extract_examples(), ids=lambda x: str(x)[:60])
def test_every_extract_example_parses_with_todays_cli(
    where: str, value: str, capsys: pytest.CaptureFixture[str]
) -> None:
    import shlex

    from cce_knowledge.cli.main import build_parser

    argv = ["knowledge", "extract", *shlex.split(value), "--out", "feed.jsonl"]
    try:
        args = build_parser().parse_args(argv)
    except SystemExit:
        pytest.fail(f"{where}: `extract: {value}` does not parse: {capsys.readouterr().err}")
    assert callable(getattr(args, "func", None)), f"{where}: {value}"
