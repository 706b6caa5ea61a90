"""Loading the optional C accelerators (compiled by `hatch_build.py` at install time).

Each accelerator has a pure Python twin that gives the same bytes; the C module is used
when it is built, not disabled (`CCE_NATIVE=0`) and not stale: an editable install
keeps the module compiled from an older C source than the one beside it, and running
that would be running other code than the checkout's.
"""

from __future__ import annotations

import hashlib
import importlib
import os
import sys
from pathlib import Path
from types import ModuleType


def disabled() -> bool:
    """`CCE_NATIVE=0`: every accelerator is off (the pure Python paths run)."""
    return os.environ.get("CCE_NATIVE", "1") == "0"


def load(module: str, source: Path, what: str) -> ModuleType | None:
    """The compiled `module` (dotted name), or None: not built, disabled, or compiled from
    another `source` than the one on disk (then a warning names `what` and the fix)."""
    if disabled():
        return None
    try:
        mod = importlib.import_module(module)
    except ImportError:
        return None
    try:
        current = hashlib.sha256(source.read_bytes()).hexdigest()
    except OSError:
        return mod  # an installed wheel ships no source: nothing to compare
    if getattr(mod, "SOURCE_SHA256", "") != current:
        print(
            f"cce: the native {what} is stale (its C source changed); using the pure "
            "Python path — re-run `pip install -e .` to rebuild it",
            file=sys.stderr,
        )
        return None
    return mod


class Accelerator:
    """One optional C module, looked up on first use and kept (`load` decides).

    `module` is False until then; tests set it to None to run the pure Python path."""

    def __init__(self, module: str, source: Path, what: str) -> None:
        self.name, self.source, self.what = module, source, what
        self.module: ModuleType | bool | None = False

    def load(self) -> ModuleType | None:
        """Look the module up now (not kept)."""
        return load(self.name, self.source, self.what)

    def get(self) -> ModuleType | None:
        """The module, or None (not built, disabled with CCE_NATIVE=0, or stale)."""
        if self.module is False:
            self.module = self.load()
        return self.module if isinstance(self.module, ModuleType) else None
