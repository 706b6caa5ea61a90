"""Issue 21 §7: the user install the README shows works, and the quickstart makes its own
venv when the active Python refuses installs (PEP 668).

Offline: pip reads a local wheelhouse (tests/helpers/wheelhouse.py: the runtime lock's
distributions, repacked from this interpreter's own copies, hatchling included for the
build) instead of PyPI, through PIP_NO_INDEX/PIP_FIND_LINKS, the same switches a user's
pip takes. Everything else is the README's command, as written.
"""

from __future__ import annotations

import os
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest

from tests.helpers.paths import REPO

README = REPO / "README.md"
SYSTEM_PYTHON = Path("/usr/bin/python3")


@pytest.fixture(scope="module")
def offline_pip(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    from tests.helpers import wheelhouse as wh

    out = tmp_path_factory.mktemp("wheelhouse")
    try:
        wh.build(REPO / "requirements" / "runtime.txt", out)
    except wh.WheelhouseUnavailable as e:
        pytest.skip(f"no offline wheelhouse: {e}")
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("PIP_", "CCE_", "VIRTUAL_ENV", "PYTHON"))
    }
    env |= {
        "PIP_NO_INDEX": "1",
        "PIP_FIND_LINKS": str(out),
        "PIP_DISABLE_PIP_VERSION_CHECK": "1",
        "CCE_HOME": str(out.parent / "cce-home"),
    }
    return env


def _run(argv: list[str], env: dict[str, str], cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        argv, env=env, cwd=cwd, capture_output=True, text=True, timeout=900, check=False
    )


def test_the_readme_shows_a_user_install_that_is_not_pypi() -> None:
    text = README.read_text(encoding="utf-8")
    section = text.split("## Install", 1)[1].split("\n## ", 1)[0]
    assert "python3 -m venv ~/.local/share/cce-knowledge" in section
    assert 'bin/pip install "git+https://github.com/cce-knowledge/cce-knowledge.git"' in section
    assert "pip install ./cce-knowledge" in section
    # Nothing is published under that name yet: no page may tell a user to fetch it.
    for page in [README, *(REPO / "docs").rglob("*.md")]:
        assert "pip install cce-knowledge\n" not in page.read_text(encoding="utf-8"), page


@pytest.mark.slow
def test_the_readme_install_from_a_checkout_gives_a_working_cce(
    tmp_path: Path, offline_pip: dict[str, str]
) -> None:
    venv = tmp_path / "share" / "cce-knowledge"
    # The README's commands, with the checkout in place of the clone.
    assert _run([sys.executable, "-m", "venv", str(venv)], offline_pip, tmp_path).returncode == 0
    p = _run([str(venv / "bin" / "pip"), "install", str(REPO)], offline_pip, tmp_path)
    assert p.returncode == 0, p.stdout[-3000:] + p.stderr[-3000:]
    cce = venv / "bin" / "cce"
    env = {**offline_pip, "PATH": "/usr/bin:/bin"}  # no other cce, no other Python
    p = _run([str(cce), "--version"], env, tmp_path)
    assert p.returncode == 0 and p.stdout.startswith("cce"), p.stderr
    feed = REPO / "examples" / "feed.jsonl"
    p = _run([str(cce), "knowledge", "index", str(feed), "--dir", "proj", "-q"], env, tmp_path)
    assert p.returncode == 0, p.stderr
    p = _run(
        [str(cce), "knowledge", "search", "how are customer passwords hashed", "--dir", "proj"],
        env,
        tmp_path,
    )
    assert p.returncode == 0 and "password" in p.stdout.lower(), p.stdout + p.stderr
    # The installed copy, not this checkout's sources, answered.
    p = _run(
        [str(venv / "bin" / "python"), "-c", "import cce_knowledge; print(cce_knowledge.__file__)"],
        env,
        tmp_path,
    )
    assert str(venv) in p.stdout


def _externally_managed(python: Path) -> bool:
    if not python.is_file():
        return False
    code = (
        "import os, sys, sysconfig; "
        "print(sys.prefix == sys.base_prefix and "
        "os.path.exists(os.path.join(sysconfig.get_path('stdlib'), 'EXTERNALLY-MANAGED')))"
    )
    p = subprocess.run([str(python), "-c", code], capture_output=True, text=True, check=False)
    return p.stdout.strip() == "True"


@pytest.mark.slow
@pytest.mark.skipif(
    not _externally_managed(SYSTEM_PYTHON), reason="no externally managed system Python (PEP 668)"
)
def test_the_quickstart_makes_its_own_venv_on_an_externally_managed_python(
    tmp_path: Path, offline_pip: dict[str, str]
) -> None:
    # That interpreter really refuses a plain install ...
    p = _run(
        [str(SYSTEM_PYTHON), "-m", "pip", "install", "--dry-run", str(REPO)], offline_pip, tmp_path
    )
    assert p.returncode != 0 and "externally-managed-environment" in p.stdout + p.stderr
    if (
        sysconfig.get_python_version()
        != _run(
            [str(SYSTEM_PYTHON), "-c", "import sysconfig; print(sysconfig.get_python_version())"],
            offline_pip,
            tmp_path,
        ).stdout.strip()
    ):
        pytest.skip("the wheelhouse is built for another Python version than the system's")
    # ... and the quickstart still runs end to end with it.
    out = tmp_path / "qs"
    env = {**offline_pip, "PYTHON": str(SYSTEM_PYTHON), "PATH": "/usr/bin:/bin"}
    p = _run(["bash", str(REPO / "examples" / "quickstart.sh"), str(out)], env, tmp_path)
    assert p.returncode == 0, p.stdout[-4000:] + p.stderr[-4000:]
    assert "refuses installs outside a virtual environment (PEP 668)" in p.stdout
    assert (out / "venv" / "bin" / "cce").is_file()
    assert "proven   : 10/10" in p.stdout
