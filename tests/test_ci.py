"""CI runs what a newcomer runs: the README's commands, verbatim, with pinned dev tools."""

from __future__ import annotations

import re
import tomllib

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

from tests.helpers.paths import REPO


def _readme_test_commands() -> list[str]:
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    section = readme[readme.index("Run the tests") : readme.index("## Commands")]
    block = re.search(r"```sh\n(.*?)```", section, re.S)
    assert block, "README.md: the test commands are in a ```sh block under 'Run the tests'"
    return [ln for ln in block.group(1).splitlines() if ln.strip()]


def test_ci_runs_the_readme_commands_verbatim() -> None:
    ci = (REPO / ".ci" / "run").read_text(encoding="utf-8")
    commands = _readme_test_commands()
    assert any("venv" in c for c in commands) and any("pytest" in c for c in commands)
    for c in commands:
        for part in c.split(" && "):
            assert part in ci, f".ci/run does not run the README's `{part}`"


def test_ci_isolates_home_and_git_identity() -> None:
    ci = (REPO / ".ci" / "run").read_text(encoding="utf-8")
    assert re.search(r'^export HOME="\$work/home"$', ci, re.M)
    assert "unset GIT_AUTHOR_NAME GIT_AUTHOR_EMAIL GIT_COMMITTER_NAME GIT_COMMITTER_EMAIL" in ci
    assert "git config --global" not in ci  # never gives the machine an identity
    for linter in ("ruff check", "ruff format --check", "mypy"):
        assert re.search(rf"^{linter}\b", ci, re.M), f".ci/run does not run {linter}"
    assert re.search(r"CCE_NATIVE=0 .*pytest", ci), ".ci/run has no pure-Python pass"


def _pins() -> dict[str, str]:
    text = (REPO / "requirements" / "dev.txt").read_text(encoding="utf-8")
    pins: dict[str, str] = {}
    for line in text.splitlines():
        m = re.match(r"^([A-Za-z0-9_.\-]+)==([^\s;]+)", line)
        if m:
            pins[canonicalize_name(m.group(1))] = m.group(2)
    return pins


def test_dev_constraints_pin_every_declared_dependency_within_its_range() -> None:
    """requirements/dev.txt is in step with pyproject.toml: every runtime and dev
    dependency is pinned, and the pin satisfies the declared range. Regenerate it with
    the command in its header after changing pyproject.toml."""
    project = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    declared = [*project["dependencies"], *project["optional-dependencies"]["dev"]]
    pins = _pins()
    for spec in declared:
        req = Requirement(spec)
        name = canonicalize_name(req.name)
        assert name in pins, f"requirements/dev.txt does not pin {req.name}"
        assert req.specifier.contains(pins[name], prereleases=True), (
            f"requirements/dev.txt pins {req.name}=={pins[name]}, outside {req.specifier}"
        )
