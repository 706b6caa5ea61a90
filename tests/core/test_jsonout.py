"""serde_json-compatible writers (docs/spec/core.md §0.8, docs/spec/sync.md §1.4)."""

from __future__ import annotations

import json

from hypothesis import given
from hypothesis import strategies as st

from cce_knowledge.core.jsonout import canonical, json_str, pretty


def test_pretty_layout_matches_serde() -> None:
    v = {"b": [1, 2.5, 0.0], "a": {}, "c": [], "d": None, "e": True, "f": "x"}
    assert pretty(v) == (
        "{\n"
        '  "b": [\n    1,\n    2.5,\n    0.0\n  ],\n'
        '  "a": {},\n'
        '  "c": [],\n'
        '  "d": null,\n'
        '  "e": true,\n'
        '  "f": "x"\n'
        "}"
    )
    assert pretty(v, sort_keys=True).index('"a"') < pretty(v, sort_keys=True).index('"b"')


def test_string_escapes_are_serde_escapes() -> None:
    # é, TAB, U+0001, '/', DEL, '"', '\\', U+2028, x  (docs/spec/sync.md §10.2)
    s = 'é\t\x01/\x7f"\\\u2028x'
    assert json_str(s).encode("utf-8") == (
        b'"' + "é".encode() + b'\\t\\u0001/\x7f\\"\\\\' + "\u2028".encode() + b'x"'
    )


def test_float_text_uses_zmij_layout() -> None:
    assert pretty([1e-5, 1e-6, 1e16, 100.0, -0.0]) == (
        "[\n  0.00001,\n  1e-6,\n  1e+16,\n  100.0,\n  -0.0\n]"
    )


json_values = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**53), 2**53) | st.text(),
    lambda children: (
        st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=5), children, max_size=4)
    ),
    max_leaves=20,
)


@given(json_values)
def test_pretty_and_canonical_round_trip(v: object) -> None:
    assert json.loads(pretty(v)) == v
    assert json.loads(canonical(v)) == v
    assert "\n" not in canonical(v).replace("\\n", "")
