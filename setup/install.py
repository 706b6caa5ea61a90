"""Install a pinned cce-knowledge into a private venv (the setup step of the Action).

Run by setup/action.yml and the root action.yml with the job's Python, before the
package exists, so it uses the standard library only:

  python3 install.py key      cache key and venv path → $GITHUB_OUTPUT
  python3 install.py install  create the venv (or reuse a valid one), install, report

The install is exactly the hashed set of requirements/runtime.txt (pip
--require-hashes), build backend included, then this action's own checkout built
without build isolation, so `uses: …@<sha>` pins every byte that runs. The venv never
sees the job's site-packages (no --system-site-packages), so it behaves the same from
a system Python, a setup-python Python or a virtualenv. Standard PIP_* variables
(PIP_INDEX_URL, PIP_FIND_LINKS, PIP_NO_INDEX …) apply as usual.

The log says whether the native .cck accelerator was built, and why not when it was
not (the build hook's own message), instead of pip --quiet hiding it.
"""

from __future__ import annotations

import hashlib
import json
import os
import platform
import re
import secrets
import shutil
import subprocess
import sys
import time
from pathlib import Path

ACTION = Path(__file__).resolve().parent.parent
LOCK = ACTION / "requirements" / "runtime.txt"
MARKER = ".cce-setup.json"
#: Files whose bytes decide what gets installed (besides the lock).
SOURCE_GLOBS = ("pyproject.toml", "hatch_build.py", "schemas/*.json", "src/**/*")


def escape_data(s: str) -> str:
    # The runner's command escaping (as cce_knowledge.action.workflow_commands, which
    # cannot be imported before the package is installed).
    return s.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")


def log(msg: str) -> None:
    print(msg, flush=True)


def annotate(level: str, msg: str) -> None:
    log(f"::{level} title=cce-knowledge setup::{escape_data(msg)}")


def set_output(name: str, value: str) -> None:
    path = os.environ.get("GITHUB_OUTPUT")
    if not path:
        log(f"{name}={value}")
        return
    with open(path, "a", encoding="utf-8") as f:
        f.write(f"{name}={value}\n")  # our own single-line values only


def source_digest() -> str:
    h = hashlib.sha256(LOCK.read_bytes())
    for pattern in SOURCE_GLOBS:
        for p in sorted(ACTION.glob(pattern)):
            if p.is_file() and "__pycache__" not in p.parts and p.suffix not in (".so", ".pyc"):
                h.update(p.relative_to(ACTION).as_posix().encode() + b"\0")
                h.update(hashlib.sha256(p.read_bytes()).digest())
    return h.hexdigest()


def cache_key() -> tuple[str, Path]:
    """(key, venv dir). The key names the runner OS and arch, the Python version, the
    action ref and the lock's hash; one more hash covers the interpreter's location,
    the build's environment and the action's own sources (a moving tag like @v2 keeps
    its ref but not them)."""
    lock_hash = hashlib.sha256(LOCK.read_bytes()).hexdigest()[:16]
    # What the build reads besides the files: the compiler and the opt-out.
    build_env = f"{os.environ.get('CC', '')}\0{os.environ.get('CCE_NO_NATIVE', '')}"
    extra = hashlib.sha256(
        f"{sys.base_prefix}\0{sys.version}\0{build_env}\0{source_digest()}".encode()
    ).hexdigest()[:16]
    ref = re.sub(r"[^A-Za-z0-9._-]+", "_", os.environ.get("ACTION_REF", "") or "local")[:64]
    key = (
        f"cce-knowledge-{platform.system().lower()}-{platform.machine().lower()}"
        f"-py{platform.python_version()}-{ref}-lock{lock_hash}-{extra}"
    )
    base = Path(os.environ.get("RUNNER_TOOL_CACHE") or os.environ.get("RUNNER_TEMP") or "/tmp")
    return key, base / "cce-knowledge" / hashlib.sha256(key.encode()).hexdigest()[:16]


def venv_python(venv: Path) -> Path:
    return venv / ("Scripts/python.exe" if os.name == "nt" else "bin/python")


def valid_venv(venv: Path, key: str) -> dict[str, str] | None:
    """The marker of a usable venv built for `key` (restored from the cache, or left by
    an earlier job on a persistent runner), else None."""
    try:
        marker = json.loads((venv / MARKER).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    if not isinstance(marker, dict) or marker.get("key") != key:
        return None
    # `cce` itself, not only the import: its script line names the venv's path, so a
    # venv restored to another place must be rebuilt.
    cce = venv_python(venv).parent / ("cce.exe" if os.name == "nt" else "cce")
    try:
        probe = subprocess.run([str(cce), "--version"], capture_output=True, check=False)
    except OSError:
        return None
    return marker if probe.returncode == 0 else None


def pip(python: Path, *args: str, capture: bool = False) -> subprocess.CompletedProcess[str]:
    base = [sys.executable, "-m", "pip", "--python", str(python)]
    if not outer_pip_ok():
        base = [str(python), "-m", "pip"]
    cmd = [*base, "--disable-pip-version-check", *args]
    return subprocess.run(cmd, capture_output=capture, text=True, check=False)


_OUTER_PIP: bool | None = None


def outer_pip_ok() -> bool:
    """pip >= 22.3 in this interpreter can install into another one (`--python`),
    which saves bootstrapping pip into the venv."""
    global _OUTER_PIP
    if _OUTER_PIP is None:
        p = subprocess.run(
            [sys.executable, "-m", "pip", "--version"], capture_output=True, text=True, check=False
        )
        m = re.match(r"pip (\d+)\.(\d+)", p.stdout)
        _OUTER_PIP = bool(m) and (int(m[1]), int(m[2])) >= (22, 3)
    return _OUTER_PIP


def accelerator_status(python: Path, build_log: str) -> str:
    probe = subprocess.run(
        [
            str(python),
            "-c",
            "from cce_knowledge.sync.accelerator import native; print(native() is not None)",
        ],
        capture_output=True,
        text=True,
        check=False,
    )
    if probe.stdout.strip() == "True":
        return "built"
    if os.environ.get("CCE_NO_NATIVE"):
        return "not built: CCE_NO_NATIVE is set"
    why = [ln.strip() for ln in build_log.splitlines() if "cce-knowledge:" in ln]
    detail = "; ".join(why) or "no message from the build hook (see the build log above)"
    return f"not built: {detail}"


def install(key: str, venv: Path) -> dict[str, str]:
    started = time.monotonic()
    shutil.rmtree(venv, ignore_errors=True)
    venv.parent.mkdir(parents=True, exist_ok=True)
    venv_args = ["--without-pip"] if outer_pip_ok() else []
    subprocess.run([sys.executable, "-m", "venv", *venv_args, str(venv)], check=True)
    python = venv_python(venv)
    log(f"installing the hashed runtime set ({LOCK.relative_to(ACTION)})")
    p = pip(python, "install", "--quiet", "--require-hashes", "--no-deps", "-r", str(LOCK))
    if p.returncode != 0:
        raise SystemExit(f"pip could not install {LOCK.name} (exit {p.returncode})")
    log("building cce-knowledge from the action's checkout (pinned backend, no isolation)")
    p = pip(
        python,
        "install",
        "--verbose",
        "--no-deps",
        "--no-build-isolation",
        "--no-index",
        "--no-compile",
        str(ACTION),
        capture=True,
    )
    build_log = p.stdout + p.stderr
    if p.returncode != 0:
        token = "cce-setup-" + secrets.token_hex(16)
        log("::group::pip build log")
        log(f"::stop-commands::{token}")  # the log is not ours to trust line by line
        log(build_log)
        log(f"::{token}::")
        log("::endgroup::")
        raise SystemExit(f"building cce-knowledge failed (exit {p.returncode})")
    version = subprocess.run(
        [str(python), "-c", "import cce_knowledge; print(cce_knowledge.__version__)"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    marker = {
        "key": key,
        "version": version,
        "accelerator": accelerator_status(python, build_log),
        "seconds": f"{time.monotonic() - started:.1f}",
    }
    (venv / MARKER).write_text(json.dumps(marker, sort_keys=True) + "\n", encoding="utf-8")
    return marker


def main(argv: list[str]) -> int:
    mode = argv[1] if len(argv) > 1 else ""
    key, venv = cache_key()
    if mode == "key":
        set_output("key", key)
        set_output("venv", str(venv))
        return 0
    if mode != "install":
        print("usage: install.py key|install", file=sys.stderr)
        return 2
    started = time.monotonic()
    marker = valid_venv(venv, key)
    if marker is not None:
        # The marker came from the cache: print what it says as data, never as a command.
        version = escape_data(str(marker.get("version")))
        log(f"cce-knowledge {version}: reusing the cached venv {venv} (key {key})")
    else:
        marker = install(key, venv)
        log(f"cce-knowledge {marker['version']}: installed into {venv} in {marker['seconds']} s")
    accel = marker.get("accelerator", "")
    if accel == "built":
        log("native .cck accelerator: built")
    else:
        annotate(
            "warning",
            f"native .cck accelerator {accel}; the pure Python path gives the same bytes, slower",
        )
    log(f"setup took {time.monotonic() - started:.1f} s")
    set_output("version", escape_data(str(marker.get("version", ""))))
    set_output("python", str(venv_python(venv)))
    set_output("bin", str(venv_python(venv).parent))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
