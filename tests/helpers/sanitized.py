"""Build a C module with the build hook's sanitizer flags and run its fuzzer under
AddressSanitizer + UBSan (tools/fuzz_*.py): skipped without gcc's libasan."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest

from tests.helpers.paths import REPO


def _libasan() -> str | None:
    if shutil.which("gcc") is None:
        return None
    out = subprocess.run(
        ["gcc", "-print-file-name=libasan.so"], capture_output=True, text=True
    ).stdout.strip()
    return out if os.path.isabs(out) and os.path.exists(out) else None


def fuzz_sanitized(tmp_path: Path, source: str, fuzzer: str, seconds: float = 6) -> str:
    """Compile `source` (a hatch_build constant's name) into tmp_path with sanitizers,
    run tools/`fuzzer` on it for `seconds`; return its stdout (fails on any report)."""
    libasan = _libasan()
    if libasan is None:
        pytest.skip("gcc with AddressSanitizer is not available")
    sys.path.insert(0, str(REPO))
    try:
        import hatch_build  # the build hook's own compile recipe, with sanitizer flags
    finally:
        sys.path.remove(str(REPO))
    src = getattr(hatch_build, source)
    so = tmp_path / f"{src.stem}{sysconfig.get_config_var('EXT_SUFFIX')}"
    assert hatch_build.build_native(REPO, so, hatch_build.SANITIZE_FLAGS, source=src) == so
    env = {**os.environ, "LD_PRELOAD": libasan, "ASAN_OPTIONS": "detect_leaks=0"}
    run = subprocess.run(
        [sys.executable, str(REPO / "tools" / fuzzer), str(so), "--seconds", str(seconds)],
        capture_output=True, text=True, env=env, timeout=300,
    )  # fmt: skip
    assert run.returncode == 0, run.stderr[-4000:]
    assert "no sanitizer report" in run.stdout
    return run.stdout
