"""Property tests for the adapters' codecs: feed writer, frontmatter, globs, newlines."""

from __future__ import annotations

import json
import re

import jsonschema
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from cce_knowledge.contract.ndjson import parse_feed
from cce_knowledge.contract.record import KnowledgeRecord
from cce_knowledge.extract.feed import clean_text, feed_bytes, normalise_newlines, record_line
from cce_knowledge.extract.frontmatter import first_heading, split_frontmatter
from cce_knowledge.extract.mdtree import glob_regex
from tests.helpers.paths import REPO

text = st.text(st.characters(codec="utf-8"), max_size=40)
opt = st.none() | text
records = st.builds(
    KnowledgeRecord,
    id=text,
    title=text,
    body=text,
    source=text,
    url=opt,
    state=opt,
    state_reason=opt,
    updated_at=opt,
    labels=st.lists(text, max_size=3),
    group=opt,
    links=st.lists(text, max_size=3),
)
SCHEMA = jsonschema.Draft202012Validator(
    json.loads((REPO / "schemas" / "cce.knowledge.v1.schema.json").read_text())
)
ORDER = [
    "id",
    "title",
    "body",
    "source",
    "url",
    "state",
    "state_reason",
    "updated_at",
    "labels",
    "group",
    "links",
]


@settings(max_examples=200, deadline=None)
@given(st.lists(records, max_size=5))
def test_feed_round_trips_through_the_contract_parser(recs: list[KnowledgeRecord]) -> None:
    data = feed_bytes(recs)
    assert data.count(b"\n") == len(recs) and (not recs or data.endswith(b"\n"))
    back = parse_feed(data.decode("utf-8"))
    assert len(back) == len(recs)
    for a, b in zip(recs, back, strict=True):
        for f in ORDER:
            assert getattr(b, f) == getattr(a, f)
    assert feed_bytes(back) == data  # canonical: a re-encode is byte-identical
    for line in data.decode("utf-8").split("\n")[:-1]:
        SCHEMA.validate(json.loads(line))


@given(records)
def test_line_keys_follow_contract_order_and_omit_absent(rec: KnowledgeRecord) -> None:
    obj = json.loads(record_line(rec))
    keys = list(obj)
    assert keys == [k for k in ORDER if k in keys]
    assert keys[:4] == ORDER[:4]
    assert None not in obj.values() and [] not in obj.values()


@given(st.text(max_size=30))
def test_lone_surrogates_become_replacement_chars(s: str) -> None:
    withsur = s + "\ud800" + s
    out = clean_text(withsur)
    out.encode("utf-8")  # must not raise
    assert out == s + "\ufffd" + s


@given(st.text(max_size=60))
def test_newline_normalisation(s: str) -> None:
    lf = normalise_newlines(s)
    assert "\r" not in lf
    assert normalise_newlines(lf.replace("\n", "\r\n")) == lf
    assert normalise_newlines(lf) == lf


safe_key = st.from_regex(r"[a-z][a-z_]{0,8}", fullmatch=True)
safe_val = (
    st.text(st.characters(min_codepoint=0x20, max_codepoint=0x7E), max_size=20) | st.integers()
)


@settings(max_examples=150, deadline=None)
@given(st.dictionaries(safe_key, safe_val, max_size=4), st.text(max_size=80))
def test_frontmatter_split_recovers_meta_and_body(meta: dict[str, object], body: str) -> None:
    body = normalise_newlines(body)
    dumped = yaml.safe_dump(meta, allow_unicode=True, sort_keys=True) if meta else ""
    doc = split_frontmatter(f"---\n{dumped}---\n{body}", path="x.md")
    assert doc.meta == meta
    assert doc.body == body
    if not body.startswith("---"):
        plain = split_frontmatter(body, path="x.md")
        assert plain.meta is None and plain.body == body


@given(
    st.lists(
        st.sampled_from(["", "text", "# decoy", "## decoy", "Decoy", "===", "    # code"]),
        max_size=8,
    ),
    st.sampled_from(["```", "~~~", "````"]),
    st.text(st.characters(min_codepoint=0x61, max_codepoint=0x7A), min_size=1, max_size=10),
)
def test_first_heading_ignores_fenced_lines(inside: list[str], fence: str, title: str) -> None:
    body = "\n".join([fence, "# decoy", *inside, fence, "", f"## {title}", "x"])
    head = first_heading(body)
    assert head == (title, 2, len(inside) + 4, len(inside) + 5)


@given(st.lists(st.from_regex(r"[a-z]{1,5}", fullmatch=True), min_size=1, max_size=4))
def test_globs(parts: list[str]) -> None:
    path = "/".join(parts) + ".md"
    assert glob_regex("**/*.md").match(path)
    assert bool(glob_regex("*.md").match(path)) == (len(parts) == 1)
    assert not glob_regex("**/*.markdown").match(path)
    assert glob_regex(parts[0] + "/**").match(path) or len(parts) == 1
    assert glob_regex("**/" + re.sub(r"[a-z]", "?", parts[-1]) + ".md").match(path)
