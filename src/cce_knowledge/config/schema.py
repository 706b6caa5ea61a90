"""The JSON Schema of `.cce/config`, generated from the settings classes.

Published as schemas/cce.config.schema.json for editors (a test keeps it in step:
regenerate with `python tools/gen_config_schema.py`).
"""

from __future__ import annotations

import json
from typing import Any

from cce_knowledge.config.check import RETENTION_PATTERN
from cce_knowledge.config.settings import Settings
from cce_knowledge.contract.schemas import SCHEMA_BASE_URI, SCHEMA_FILES

SCHEMA_FILE = SCHEMA_FILES["cce.config"]
SCHEMA_ID = SCHEMA_BASE_URI + SCHEMA_FILE


def config_json_schema() -> dict[str, Any]:
    # Lazy: pydantic costs ~80 ms; only the schema tool and its test need it.
    from pydantic import TypeAdapter

    schema = TypeAdapter(Settings).json_schema(mode="validation")
    # Not a key: the reason a configured `knowledge.semantic` is unusable.
    # Not keys either: why a value is unusable, and the file's problems.
    del schema["$defs"]["KnowledgeSettings"]["properties"]["semantic_problem"]
    del schema["$defs"]["KnowledgeSettings"]["properties"]["ranking_problem"]
    del schema["$defs"]["KnowledgeSyncSettings"]["properties"]["retention_problem"]
    del schema["properties"]["problems"]
    # The retention grammar (docs/spec/sync.md §3.4), so `validate` names a typo.
    for blk in ("KnowledgeSyncSettings", "SyncSettings"):
        schema["$defs"][blk]["properties"]["retention"]["pattern"] = RETENTION_PATTERN
    return {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "$id": SCHEMA_ID,
        **schema,
        "title": "cce .cce/config",
        "description": (
            "Project settings of cce-knowledge (YAML). Keys the reference engine also "
            "reads follow its tolerance rules: a value of the wrong type resets its block "
            "to the defaults. Unknown keys are ignored."
        ),
    }


def config_schema_text() -> str:
    return json.dumps(config_json_schema(), indent=2, sort_keys=True, ensure_ascii=False) + "\n"
