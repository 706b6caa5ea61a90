"""`cce` run as users run it: a new `python -m cce_knowledge` process."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Mapping
from pathlib import Path

#: The command line of a `cce` process (this interpreter, the package under test).
CCE = [sys.executable, "-m", "cce_knowledge"]


def run_cce(
    *args: str,
    cwd: Path | None = None,
    env: Mapping[str, str] | None = None,
    timeout: float = 120,
    check: bool = False,
) -> subprocess.CompletedProcess[str]:
    """Run `cce ARGS…`, capturing its output as text."""
    return subprocess.run(
        [*CCE, *args],
        cwd=cwd,
        env=None if env is None else dict(env),
        capture_output=True,
        text=True,
        check=check,
        timeout=timeout,
    )
