"""The shipped JSON Schemas (2020-12), loadable from the wheel or an editable checkout.

The wheel carries `schemas/` as `cce_knowledge/schemas`; an editable install has
only the repository's top-level `schemas/` directory, so both places are tried.
"""

from __future__ import annotations

import json
from functools import cache
from importlib import resources
from pathlib import Path
from typing import Any

SCHEMA_BASE_URI = "https://cce-knowledge.dev/schemas/"

#: Contract id → schema file name.
SCHEMA_FILES: dict[str, str] = {
    "cce.knowledge/v1": "cce.knowledge.v1.schema.json",
    "cce.feed-manifest/v1": "cce.feed-manifest.v1.schema.json",
    "cce.knowledge.ask/v1": "cce.knowledge.ask.v1.schema.json",
    "cce.knowledge.store/v1": "cce.knowledge.store.v1.schema.json",
    "cce.knowledgemeta/v1": "cce.knowledgemeta.v1.schema.json",
    "cce.knowledge.synced/v1": "cce.knowledge.synced.v1.schema.json",
    "cce.knowledge.ask.report/v1": "cce.knowledge.ask.report.v1.schema.json",
    "cce.synclist/v1": "cce.synclist.v1.schema.json",
    "cce.chunk-policy/v1": "cce.chunk-policy.v1.schema.json",
    # `.cce/config` (YAML, not versioned): generated from config/settings.py.
    "cce.config": "cce.config.schema.json",
}


def schema_dir() -> Path:
    """The directory holding the schema files (wheel first, then the checkout)."""
    try:
        packaged = resources.files("cce_knowledge") / "schemas"
        if packaged.is_dir():
            return Path(str(packaged))
    except (ModuleNotFoundError, TypeError):  # pragma: no cover - odd importers
        pass
    checkout = Path(__file__).resolve().parents[3] / "schemas"
    if checkout.is_dir():
        return checkout
    raise FileNotFoundError("the cce-knowledge JSON schemas are not installed")


@cache
def _load(file_name: str) -> str:
    return (schema_dir() / file_name).read_text(encoding="utf-8")


def load_schema(contract: str) -> dict[str, Any]:
    """The schema for a contract id (`cce.knowledge/v1`, …) or a schema file name."""
    name = SCHEMA_FILES.get(contract, contract)
    if name not in SCHEMA_FILES.values():
        raise KeyError(f"no schema for {contract!r}")
    result: dict[str, Any] = json.loads(_load(name))
    return result
