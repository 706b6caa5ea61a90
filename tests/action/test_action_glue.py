"""GitHub Actions glue (`cce_knowledge.action.workflow_commands`): escaping, outputs, summary, masking."""

from __future__ import annotations

import io
import re
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from cce_knowledge.action import workflow_commands as actions


def _unescape_data(s: str) -> str:
    # The runner's inverse (toolkit command.ts), applied in this order.
    return s.replace("%0D", "\r").replace("%0A", "\n").replace("%25", "%")


def _unescape_property(s: str) -> str:
    return _unescape_data(s.replace("%3A", ":").replace("%2C", ","))


def _parse_output_file(text: str) -> dict[str, str]:
    """Parse $GITHUB_OUTPUT the way the runner does (heredoc form only)."""
    out: dict[str, str] = {}
    lines = text.split("\n")
    i = 0
    while i < len(lines):
        if not lines[i]:
            i += 1
            continue
        name, sep, delim = lines[i].partition("<<")
        assert sep, f"not heredoc form: {lines[i]!r}"
        j = lines.index(delim, i + 1)
        out[name] = "\n".join(lines[i + 1 : j])
        i = j + 1
    return out


@given(st.text())
def test_escape_data_round_trips_and_stays_on_one_line(s: str) -> None:
    e = actions.escape_data(s)
    assert "\n" not in e and "\r" not in e
    assert _unescape_data(e) == s


@given(st.text())
def test_escape_property_round_trips_and_cannot_break_out(s: str) -> None:
    e = actions.escape_property(s)
    assert not set(e) & {"\n", "\r", ":", ","}
    assert _unescape_property(e) == s


def test_annotation_format_with_hostile_file_name_and_message() -> None:
    line = actions.annotation(
        "error", "bad\nline 100%", file="feeds/a,b:c.jsonl", line=7, title="t"
    )
    assert line == "::error file=feeds/a%2Cb%3Ac.jsonl,line=7,title=t::bad%0Aline 100%25"
    # The only `::` separators are the command's own.
    assert line.count("::") == 2


def test_annotation_rejects_unknown_level() -> None:
    with pytest.raises(actions.ActionsError):
        actions.annotation("fatal", "x")


def test_annotation_omits_missing_properties() -> None:
    assert actions.annotation("warning", "m") == "::warning::m"
    assert actions.annotation("notice", "m", file="f", line=None) == "::notice file=f::m"


@given(
    st.dictionaries(st.from_regex(r"[a-z][a-z0-9_-]{0,10}", fullmatch=True), st.text(), max_size=5)
)
def test_outputs_round_trip_through_the_runner_format(
    tmp_path_factory: pytest.TempPathFactory, values: dict[str, str]
) -> None:
    # Values with CR would be normalised by the runner's line reader; keep to LF text.
    values = {k: v.replace("\r", "") for k, v in values.items()}
    f = tmp_path_factory.mktemp("out") / "GITHUB_OUTPUT"
    f.write_text("")
    for k, v in values.items():
        actions.set_output(k, v, f)
    assert _parse_output_file(f.read_text()) == values


def test_output_value_cannot_inject_a_second_output(tmp_path: Path) -> None:
    f = tmp_path / "out"
    evil = "x\npublished=true\nEOF\nartifact-key<<EOF\npwn\nEOF"
    actions.set_output("snapshot", evil, f)
    parsed = _parse_output_file(f.read_text())
    assert parsed == {"snapshot": evil}


def test_set_output_validates_name_and_needs_a_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    with pytest.raises(actions.ActionsError, match="invalid output name"):
        actions.set_output("a<<b", "v", tmp_path / "o")
    monkeypatch.delenv("GITHUB_OUTPUT", raising=False)
    with pytest.raises(actions.ActionsError, match="GITHUB_OUTPUT is not set"):
        actions.set_output("a", "v")


def test_set_output_uses_env_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    f = tmp_path / "o"
    monkeypatch.setenv("GITHUB_OUTPUT", str(f))
    actions.set_output("records", "3")
    assert _parse_output_file(f.read_text()) == {"records": "3"}


def test_append_summary(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("GITHUB_STEP_SUMMARY", raising=False)
    assert actions.append_summary("# x") is False
    f = tmp_path / "sum.md"
    monkeypatch.setenv("GITHUB_STEP_SUMMARY", str(f))
    assert actions.append_summary("# one") is True
    assert actions.append_summary("two\n") is True
    assert f.read_text() == "# one\ntwo\n"


def test_add_mask_masks_every_line() -> None:
    buf = io.StringIO()
    actions.add_mask("abc\ndef%\n\n", buf)
    assert buf.getvalue() == "::add-mask::abc\n::add-mask::def%25\n"


def test_stop_commands_wraps_with_a_fresh_token() -> None:
    buf = io.StringIO()
    with actions.stop_commands(buf):
        buf.write("::error::not obeyed\n")
    lines = buf.getvalue().split("\n")
    m = re.fullmatch(r"::stop-commands::(cce-[0-9a-f]{32})", lines[0])
    assert m, lines[0]
    assert lines[1] == "::error::not obeyed"
    assert lines[2] == f"::{m[1]}::"
    buf2 = io.StringIO()
    with actions.stop_commands(buf2):
        pass
    assert buf2.getvalue().split("\n")[0] != lines[0]


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("", False),
        ("  ", False),
        ("true", True),
        ("True", True),
        ("TRUE", True),
        ("false", False),
        ("FALSE", False),
    ],
)
def test_parse_bool_input(value: str, expected: bool) -> None:
    assert actions.parse_bool_input("dry-run", value) is expected


@pytest.mark.parametrize("value", ["yes", "1", "on", "tru", "tRue"])
def test_parse_bool_input_rejects_non_core_schema(value: str) -> None:
    with pytest.raises(actions.ActionsError, match="input `force`"):
        actions.parse_bool_input("force", value)


def test_parse_bool_input_default() -> None:
    assert actions.parse_bool_input("x", None, default=True) is True


@given(st.text())
def test_md_code_is_one_span_and_keeps_the_text(s: str) -> None:
    span = actions.md_code(s)
    assert "\n" not in span and "\r" not in span
    fence = re.match(r"`+", span)
    assert fence is not None
    n = len(fence.group(0))
    assert span.endswith("`" * n)
    inner = span[n:-n]
    # No backtick run inside is as long as the fence, so the span cannot close early.
    assert all(len(r) < n for r in re.findall(r"`+", inner))
    # Unescaped pipes would split a table cell.
    assert re.search(r"(?<!\\)\|", inner) is None


def test_md_table() -> None:
    t = actions.md_table(["a", "b"], [["1", "2"]])
    assert t == "| a | b |\n|---|---|\n| 1 | 2 |\n"


def test_is_github_actions() -> None:
    assert actions.is_github_actions({"GITHUB_ACTIONS": "true"})
    assert not actions.is_github_actions({"GITHUB_ACTIONS": "1"})
    assert not actions.is_github_actions({})
