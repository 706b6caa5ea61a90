"""Output as values: one reporter per format, chosen by name (`--json` picks json)."""

from __future__ import annotations

import argparse
import io

from cce_knowledge.cli.report import REPORTERS, Report, emit, reporter_for


def _report() -> Report:
    return Report(lambda: "plain text\n", lambda: {"b": 1, "a": [1, 2]})


def test_each_format_has_one_reporter_chosen_by_name() -> None:
    assert set(REPORTERS) == {"text", "json"}
    assert reporter_for(argparse.Namespace(json=True)).name == "json"
    assert reporter_for(argparse.Namespace(json=False)).name == "text"
    assert reporter_for(argparse.Namespace()).name == "text"  # a command without --json


def test_text_and_json_render_the_same_result() -> None:
    text, data = io.StringIO(), io.StringIO()
    emit(argparse.Namespace(json=False), _report(), text)
    emit(argparse.Namespace(json=True), _report(), data)
    assert text.getvalue() == "plain text\n"
    assert data.getvalue() == '{\n  "a": [\n    1,\n    2\n  ],\n  "b": 1\n}\n'
    kept = io.StringIO()
    emit(argparse.Namespace(json=True), Report(lambda: "", lambda: {"b": 1, "a": 2}, False), kept)
    assert kept.getvalue() == '{\n  "b": 1,\n  "a": 2\n}\n'  # declaration order kept


def test_only_the_chosen_side_is_computed() -> None:
    def boom() -> object:
        raise AssertionError("the json side must not be built for text")

    out = io.StringIO()
    emit(argparse.Namespace(json=False), Report(lambda: "ok\n", boom), out)
    assert out.getvalue() == "ok\n"
