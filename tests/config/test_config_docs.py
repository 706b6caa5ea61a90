"""docs/config.md is generated from the settings classes (tools/gen_config_schema.py)
and lists every key with its type, default, an example and the commands that read it
(issue 35 §6)."""

from __future__ import annotations

from cce_knowledge.config.schema import USED_BY, config_keys, config_reference_markdown
from tests.helpers.paths import REPO


def test_config_docs_are_in_step_with_the_settings() -> None:
    published = (REPO / "docs" / "config.md").read_text(encoding="utf-8")
    assert published == config_reference_markdown(), "run: python tools/gen_config_schema.py"


def test_every_key_says_who_reads_it_and_nothing_else_is_listed() -> None:
    keys = [k for k, _ in config_keys()]
    assert sorted(keys) == sorted(USED_BY)
    text = config_reference_markdown()
    for key in keys:
        assert f"\n## `{key}`\n" in text
        assert f"| `{key}` |" in text
    assert "| `knowledge.min_score` | number | 0.3 |" in text
    assert "```yaml\nknowledge:\n  sync:\n    retention: keep-last-10\n```" in text
