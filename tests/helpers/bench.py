"""Import a script from bench/ (a folder of scripts, not a package) as a module."""

from __future__ import annotations

import importlib.util
import sys
from types import ModuleType

from tests.helpers.paths import REPO


def load_bench_script(name: str) -> ModuleType:
    path = REPO / "bench" / f"{name}.py"
    spec = importlib.util.spec_from_file_location(f"bench_{name}", path)
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses and typing look the module up by name
    spec.loader.exec_module(module)
    return module
