"""Issue 21 §7: what the README and the quickstart page promise holds, run for real."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path

from tests.helpers.cce_proc import CCE
from tests.helpers.paths import REPO


def test_the_quickstart_says_git_lfs_is_required_and_stops_without_it(tmp_path: Path) -> None:
    page = (REPO / "docs" / "quickstart.md").read_text(encoding="utf-8")
    requirements = page.split("Requirements:", 1)[1].split("\n\n", 1)[0]
    assert "**git-lfs** — required" in requirements
    assert "optional" not in requirements.split("optionally")[0]
    # A PATH with git but no git-lfs: the script stops before doing anything.
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for tool in ("git", "bash", "dirname", "mkdir", "printf"):
        found = shutil.which(tool)
        assert found is not None
        (bin_dir / tool).symlink_to(found)
    assert shutil.which("git-lfs", path=str(bin_dir)) is None
    p = subprocess.run(
        ["bash", str(REPO / "examples" / "quickstart.sh"), str(tmp_path / "out")],
        env={"PATH": str(bin_dir), "HOME": str(tmp_path)},
        capture_output=True,
        text=True,
        check=False,
        timeout=60,
    )
    assert p.returncode == 1
    assert p.stderr.startswith("error: git-lfs is not installed;")
    assert not (tmp_path / "out" / "cache.git").exists()


def test_the_readme_names_sync_verify_as_it_runs(tmp_path: Path) -> None:
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    row = next(ln for ln in readme.splitlines() if ln.startswith("| `cce sync init"))
    assert "verify --checksum-only" in row
    env = {**os.environ, "PYTHONPATH": str(REPO / "src")}
    plain = subprocess.run(
        [*CCE, "sync", "verify", "--dir", str(tmp_path)],
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )
    assert plain.returncode == 2 and "--checksum-only" in plain.stderr
    named = subprocess.run(
        [*CCE, "sync", "verify", "--checksum-only", "--dir", str(tmp_path)],
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )
    assert named.returncode != 2, named.stderr  # the README's form is a valid command line


def test_no_page_uses_a_heading_id_suffix_github_does_not_render() -> None:
    for page in [REPO / "README.md", *(REPO / "docs").rglob("*.md")]:
        for line in page.read_text(encoding="utf-8").splitlines():
            assert not re.match(r"^#{1,6} .*\{#[\w-]+\}\s*$", line), f"{page.name}: {line}"
