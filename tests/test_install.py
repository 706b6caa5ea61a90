"""Issue 21 §7: the user install the README shows works, and the quickstart makes its own
venv when the active Python refuses installs (PEP 668).

Offline: pip reads a local wheelhouse (tests/helpers/wheelhouse.py: the runtime lock's
distributions, repacked from this interpreter's own copies, hatchling included for the
build) instead of PyPI, through PIP_NO_INDEX/PIP_FIND_LINKS, the same switches a user's
pip takes. Everything else is the README's command, as written.
"""

from __future__ import annotations

import os
import re
import shutil
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


def _install_section() -> str:
    return README.read_text(encoding="utf-8").split("## Install", 1)[1].split("\n## ", 1)[0]


def _by_hand_block() -> str:
    """The README's by-hand install: the ```sh block that makes the venv."""
    blocks = re.findall(r"^```sh\n(.*?)^```$", _install_section(), flags=re.M | re.S)
    [block] = [b for b in blocks if "python3 -m venv ~/.local/share/cce-knowledge" in b]
    return block


def test_the_readme_leads_with_tool_installers_that_manage_path() -> None:
    """Issue 35 §1: pipx / uv tool first, each with its PATH step, before the by-hand way."""
    section = _install_section()
    first = section.index("```sh")
    assert (
        section.index('pipx install "git+https://github.com/cce-knowledge/cce-knowledge.git"')
        > first
    )
    assert section.index("pipx ensurepath") < section.index("python3 -m venv")
    assert "uv tool install" in section and "uv tool update-shell" in section


def test_the_readme_shows_a_user_install_that_is_not_pypi() -> None:
    section = _install_section()
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
    assert "no virtual environment is active for" in p.stdout
    assert (out / "venv" / "bin" / "cce").is_file()
    assert "proven   : 10/10" in p.stdout


def _readme_install(block: str, checkout: Path, python: str) -> str:
    """The README's by-hand block with this checkout for the git URL and `python` for
    `python3` (the wheelhouse is built for this interpreter's version)."""
    url = '"git+https://github.com/cce-knowledge/cce-knowledge.git"'
    assert url in block and block.startswith("python3 -m venv ")
    return block.replace(url, str(checkout)).replace("python3 -m venv", f"{python} -m venv", 1)


@pytest.mark.slow
def test_the_readme_install_works_on_a_fresh_account_without_local_bin_on_path(
    tmp_path: Path, offline_pip: dict[str, str]
) -> None:
    """Issue 35 §1: `cce: command not found` right after the README's install. A fresh
    account: an empty HOME, and a PATH without ~/.local/bin."""
    home = tmp_path / "home"
    home.mkdir()
    env = {**offline_pip, "HOME": str(home), "PATH": "/usr/bin:/bin"}
    script = _readme_install(_by_hand_block(), REPO, sys.executable)
    p = _run(["bash", "-e", "-c", script], env, tmp_path)
    assert p.returncode == 0, p.stdout[-3000:] + p.stderr[-3000:]
    assert re.search(r"^cce-knowledge \S+$", p.stdout, flags=re.M), p.stdout
    # It said the folder is not on PATH, and how to add it for good ...
    assert "note: ~/.local/bin is not on PATH. Add it for good with:\n" in p.stdout
    hint = (
        "  echo 'export PATH=\"$HOME/.local/bin:$PATH\"' >> ~/.profile   (then open a new shell)\n"
    )
    assert hint in p.stdout
    # ... and that line, run as printed, gives a new login shell a working `cce`.
    fix = hint.strip().split("   (then", 1)[0]
    assert _run(["bash", "-c", fix], env, tmp_path).returncode == 0
    p = _run(["bash", "-l", "-c", "cce --version"], env, tmp_path)
    assert p.returncode == 0 and p.stdout.startswith("cce"), p.stdout + p.stderr
    # Where ~/.local/bin is on PATH already, nothing is said.
    env_on = {**env, "PATH": f"{home}/.local/bin:/usr/bin:/bin"}
    p = _run(["bash", "-e", "-c", script], env_on, tmp_path)
    assert p.returncode == 0, p.stderr[-3000:]
    assert "not on PATH" not in p.stdout


def _plain_python(where: Path) -> Path:
    """A Python that is no virtual environment and whose global site-packages is ours to
    watch: this interpreter's base binary, its standard library linked in, and pip
    (pyenv, conda and python.org Pythons look like this; none refuses an install)."""
    base = Path(sys.base_prefix)
    ver = f"python{sys.version_info.major}.{sys.version_info.minor}"
    lib = where / "lib" / ver
    site = lib / "site-packages"
    site.mkdir(parents=True)
    for entry in (base / "lib" / ver).iterdir():
        if entry.name != "site-packages":
            (lib / entry.name).symlink_to(entry)
    real_site = base / "lib" / ver / "site-packages"
    for pip in [real_site / "pip", *real_site.glob("pip-*.dist-info")]:
        (site / pip.name).symlink_to(pip)
    (where / "bin").mkdir()
    exe = where / "bin" / "python3"
    shutil.copy2(os.path.realpath(sys._base_executable), exe)  # type: ignore[attr-defined]
    return exe


@pytest.mark.slow
def test_the_quickstart_never_installs_into_a_global_site_packages(
    tmp_path: Path, offline_pip: dict[str, str]
) -> None:
    """Issue 35 §3: with no venv active, the quickstart installed into whatever Python
    was first on PATH. Now it makes a venv of its own under the output folder."""
    py = _plain_python(tmp_path / "plain")
    probe = "import sys, site; print(sys.prefix == sys.base_prefix, site.getsitepackages())"
    p = _run([str(py), "-c", probe], offline_pip, tmp_path)
    if p.returncode != 0 or not p.stdout.startswith("True"):
        pytest.skip(f"cannot lay out a plain Python here: {p.stdout}{p.stderr}")
    assert str(tmp_path / "plain") in p.stdout
    if _run([str(py), "-m", "pip", "--version"], offline_pip, tmp_path).returncode != 0:
        pytest.skip("no pip to link into the plain Python")
    site = tmp_path / "plain" / "lib" / f"python{sys.version_info.major}.{sys.version_info.minor}"
    before = sorted(os.listdir(site / "site-packages"))
    out = tmp_path / "qs"
    env = {
        **offline_pip,
        "PATH": f"{py.parent}:/usr/bin:/bin",
        "PYTHONDONTWRITEBYTECODE": "1",
    }
    p = _run(["bash", str(REPO / "examples" / "quickstart.sh"), str(out)], env, tmp_path)
    assert p.returncode == 0, p.stdout[-4000:] + p.stderr[-4000:]
    assert (
        f"no virtual environment is active for python3: installing into a venv of its own,\n{out}/venv"
        in p.stdout
    )
    assert sorted(os.listdir(site / "site-packages")) == before
    assert not (tmp_path / "plain" / "bin" / "cce").exists()
    assert (out / "venv" / "bin" / "cce").is_file()
    assert "proven   : 10/10" in p.stdout


@pytest.mark.slow
def test_the_quickstart_uses_the_active_venv(tmp_path: Path, offline_pip: dict[str, str]) -> None:
    venv = tmp_path / "active"
    assert _run([sys.executable, "-m", "venv", str(venv)], offline_pip, tmp_path).returncode == 0
    out = tmp_path / "qs"
    env = {**offline_pip, "VIRTUAL_ENV": str(venv), "PATH": f"{venv}/bin:/usr/bin:/bin"}
    p = _run(["bash", str(REPO / "examples" / "quickstart.sh"), str(out)], env, tmp_path)
    assert f"installing into the active virtual environment, {venv}\n" in p.stdout
    assert f"$ python3 -m pip install -q -e {REPO}\n" in p.stdout
    assert not (out / "venv").exists()
    # The editable build needs `editables`, which the offline wheelhouse (this
    # interpreter's runtime set) may lack: then pip stops there, in that venv.
    if "editables" in p.stdout + p.stderr and p.returncode != 0:
        return
    assert p.returncode == 0, p.stdout[-4000:] + p.stderr[-4000:]
    assert (venv / "bin" / "cce").is_file()
    assert "proven   : 10/10" in p.stdout
