"""What the sanitizer fuzzers (`fuzz_cckfast.py`, `fuzz_analyzefast.py`) share: loading
a build of a C module from its path, and their command line."""

from __future__ import annotations

import argparse
import importlib.util
from types import ModuleType


def load(path: str, name: str) -> ModuleType:
    """The extension module `name` from the file at `path` (a sanitizer build)."""
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None:
        raise SystemExit(f"cannot load {path}")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def arguments(doc: str | None, name: str) -> argparse.Namespace:
    """`MODULE [--seconds S] [--seed N]`, with the fuzzer's docstring as its help."""
    ap = argparse.ArgumentParser(
        description=doc, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("module", help=f"path of a (sanitizer) build of {name}")
    ap.add_argument("--seconds", type=float, default=60.0)
    ap.add_argument("--seed", type=int, default=0)
    return ap.parse_args()
