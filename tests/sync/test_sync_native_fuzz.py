"""The native accelerator under AddressSanitizer + UBSan: damaged input never makes it
read or write out of bounds (tools/fuzz_cckfast.py, a few seconds per run)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest

from tests.helpers.paths import REPO

ROOT = REPO


def _libasan() -> str | None:
    if shutil.which("gcc") is None:
        return None
    out = subprocess.run(
        ["gcc", "-print-file-name=libasan.so"], capture_output=True, text=True
    ).stdout.strip()
    return out if os.path.isabs(out) and os.path.exists(out) else None


@pytest.mark.slow
def test_native_accelerator_is_memory_safe_on_damaged_input(tmp_path: Path) -> None:
    libasan = _libasan()
    if libasan is None:
        pytest.skip("gcc with AddressSanitizer is not available")
    so = tmp_path / f"_cckfast{sysconfig.get_config_var('EXT_SUFFIX')}"
    sys.path.insert(0, str(ROOT))
    try:
        import hatch_build  # the build hook's own compile recipe, with sanitizer flags
    finally:
        sys.path.remove(str(ROOT))
    assert hatch_build.build_native(ROOT, so, hatch_build.SANITIZE_FLAGS) == so

    env = {**os.environ, "LD_PRELOAD": libasan, "ASAN_OPTIONS": "detect_leaks=0"}
    run = subprocess.run(
        [sys.executable, str(ROOT / "tools/fuzz_cckfast.py"), str(so), "--seconds", "6"],
        capture_output=True, text=True, env=env, timeout=300,
    )  # fmt: skip
    assert run.returncode == 0, run.stderr[-4000:]
    assert "no sanitizer report" in run.stdout
