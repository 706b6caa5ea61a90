"""Write schemas/cce.config.schema.json and docs/config.md from the settings classes.

Run after changing src/cce_knowledge/config/settings.py; tests/config checks that the
published file is in step.
"""

from __future__ import annotations

from pathlib import Path

from cce_knowledge.config.schema import (
    SCHEMA_FILE,
    config_reference_markdown,
    config_schema_text,
)


def main() -> None:
    repo = Path(__file__).resolve().parents[1]
    out = repo / "schemas" / SCHEMA_FILE
    out.write_text(config_schema_text(), encoding="utf-8")
    print(f"wrote {out}")
    doc = repo / "docs" / "config.md"
    doc.write_text(config_reference_markdown(), encoding="utf-8")
    print(f"wrote {doc}")


if __name__ == "__main__":
    main()
