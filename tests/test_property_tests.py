"""Property tests filter their inputs with `assume()`, never with an early `return`:
a bare return counts a skipped example as a pass, and Hypothesis cannot tell when the
filter throws most examples away."""

from __future__ import annotations

import ast
from pathlib import Path

from tests.helpers.paths import REPO


def _early_returns(path: Path, root: Path = REPO) -> list[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    out = []
    for fn in ast.walk(tree):
        if not isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)):
            continue
        if not any("given" in ast.unparse(d) for d in fn.decorator_list):
            continue
        for node in ast.walk(fn):
            # `if <filter>: return` and nothing else: a filter written as a pass.
            if (
                isinstance(node, ast.If)
                and not node.orelse
                and len(node.body) == 1
                and isinstance(node.body[0], ast.Return)
                and node.body[0].value is None
            ):
                out.append(f"{path.relative_to(root)}:{node.lineno} in {fn.name}")
    return out


def test_property_tests_filter_with_assume() -> None:
    found = [x for p in sorted((REPO / "tests").rglob("test_*.py")) for x in _early_returns(p)]
    assert found == []


def test_the_check_sees_an_early_return(tmp_path: Path) -> None:
    probe = tmp_path / "test_probe.py"
    src = "@given(st.text())\ndef test_x(s):\n    if not s:\n        return\n    assert s\n"
    probe.write_text(src, encoding="utf-8")
    assert _early_returns(probe, tmp_path) == ["test_probe.py:3 in test_x"]
