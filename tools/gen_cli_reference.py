"""Render `docs/cli-reference.md` from the live argparse tree, so the reference is
exactly `--help`. `tests/cli/test_cli_reference.py` fails when the file is stale:
re-run `python tools/gen_cli_reference.py` after changing a command.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

OUT = Path(__file__).resolve().parents[1] / "docs" / "cli-reference.md"


def _walk(p: argparse.ArgumentParser, path: list[str]) -> list[tuple[list[str], str]]:
    out = [(path, p.format_help())]
    for action in p._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                out.extend(_walk(sub, [*path, name]))
    return out


def render() -> str:
    os.environ["COLUMNS"] = "100"  # argparse wraps to the terminal: pin it
    from cce_knowledge.cli.main import build_parser

    lines = [
        "# CLI reference",
        "",
        "Generated from `--help` by `tools/gen_cli_reference.py`; do not edit by hand.",
        "Each command also has a page in `docs/cli/` with examples, output and errors.",
        "",
    ]
    for path, text in _walk(build_parser(), ["cce"]):
        lines += [f"## `{' '.join(path)}`", "", "```text", text.rstrip("\n"), "```", ""]
    return "\n".join(lines)


def main() -> int:
    text = render()
    if "--check" in sys.argv:
        return 0 if OUT.exists() and OUT.read_text(encoding="utf-8") == text else 1
    OUT.write_text(text, encoding="utf-8")
    print(f"wrote {OUT}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
