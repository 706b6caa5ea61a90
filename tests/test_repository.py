"""The repository stands alone: what a fresh clone holds is all a reader needs.

- no tracked file points outside the repository (a sibling checkout, this machine's
  directories);
- every `docs/spec/<file>.md §N` citation, in any tracked file, names a section that
  exists in that document;
- every relative markdown link in README.md and docs/ resolves to a tracked path.
"""

from __future__ import annotations

import re
import subprocess
from functools import cache
from pathlib import Path

import pytest

from tests.helpers.paths import REPO

# Spelled as patterns so this file does not match itself.
_OUTSIDE = [
    (re.compile(r"\.\./shared\b"), "a sibling checkout beside the repository"),
    (re.compile(r"(?<![\w.-])/wor[k]/"), "this machine's work directory"),
    (re.compile(r"bench-dat[a]/"), "this machine's bench data directory"),
    (re.compile(r"conformance-(?:cor[e]|syn[c])\.md"), "a spec document not in the repository"),
    (re.compile(r"(?<![\w.-])/(?:Users|root)/\w"), "a home directory"),
    # /home/me/… is the docs' example user; any other home is someone's machine.
    (re.compile(r"(?<![\w.-])/home/(?!me/)\w"), "a home directory"),
]

_CITATION = re.compile(
    r"docs/spec/([A-Za-z0-9_-]+)\.md"
    r"(\s*\(?\s*§\s?\d+(?:\.\d+)*(?:\s*(?:,|–|-|/|and|or)\s*§\s?\d+(?:\.\d+)*)*)?"
)
_SECTION_NUMBER = re.compile(r"§\s?(\d+(?:\.\d+)*)")
_HEADING_NUMBER = re.compile(r"^#{1,6}\s+§?(\d+(?:\.\d+)*)\.?\s", re.MULTILINE)

_LINK = re.compile(r"\[[^\]\n]*\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")
_REF_LINK = re.compile(r"^\s{0,3}\[[^\]\n]+\]:\s*<?(\S+?)>?(?:\s|$)", re.MULTILINE)
_FENCE = re.compile(r"^(```|~~~).*?^\1[^\n]*$", re.MULTILINE | re.DOTALL)
_INLINE_CODE = re.compile(r"`[^`\n]*`")


@cache
def tracked_files() -> tuple[str, ...]:
    out = subprocess.run(
        ["git", "-C", str(REPO), "ls-files", "-z"], capture_output=True, check=True
    ).stdout
    return tuple(p for p in out.decode().split("\0") if p)


def _text(rel: str) -> str | None:
    try:
        data = (REPO / rel).read_bytes()
    except (FileNotFoundError, IsADirectoryError):
        return None  # deleted in the work tree but still in the index
    if b"\0" in data[:8192]:
        return None
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        return None


@cache
def spec_sections(name: str) -> frozenset[str] | None:
    path = REPO / "docs" / "spec" / f"{name}.md"
    if not path.is_file():
        return None
    return frozenset(_HEADING_NUMBER.findall(path.read_text(encoding="utf-8")))


def test_the_repository_is_a_git_checkout() -> None:
    # The checks below read `git ls-files`; without it they would pass vacuously.
    assert len(tracked_files()) > 100
    assert "README.md" in tracked_files()


def test_no_tracked_file_refers_to_a_path_outside_the_repository() -> None:
    found = []
    for rel in tracked_files():
        text = _text(rel)
        if text is None:
            continue
        for n, line in enumerate(text.splitlines(), 1):
            for pattern, what in _OUTSIDE:
                if pattern.search(line):
                    found.append(f"{rel}:{n}: {what}: {line.strip()[:120]}")
    assert not found, "\n".join(found)


@pytest.mark.parametrize(
    "line",
    [
        "see .." + "/shared/design.md",
        "python x.py /wor" + "k/shared/bench/rfcs.jsonl",
        "index of /wor" + "k/bench-" + "data/root100k",
        "conformance-" + "core.md §6.4",
        "cd /home/" + "alice/src",
    ],
)
def test_the_outside_path_patterns_catch_what_they_are_for(line: str) -> None:
    assert any(p.search(line) for p, _ in _OUTSIDE)


@pytest.mark.parametrize(
    "line",
    ["--dir /home/me/ctx/acme", "--root /workspace/.a3s/kb", "file:///tmp/cache.git"],
)
def test_the_outside_path_patterns_leave_examples_alone(line: str) -> None:
    assert not any(p.search(line) for p, _ in _OUTSIDE)


def _citations(text: str) -> list[tuple[str, list[str]]]:
    return [(m[1], _SECTION_NUMBER.findall(m[2] or "")) for m in _CITATION.finditer(text)]


def test_citation_parsing() -> None:
    text = (
        "per docs/spec/core.md §0.8, docs/spec/sync.md §4.5 and "
        "docs/spec/core.md (§2–§6); docs/spec/README.md; docs/spec/core.md\n§10.2"
    )
    assert _citations(text) == [
        ("core", ["0.8"]),
        ("sync", ["4.5"]),
        ("core", ["2", "6"]),
        ("README", []),
        ("core", ["10.2"]),
    ]


def test_every_spec_citation_names_an_existing_section() -> None:
    bad, seen = [], 0
    for rel in tracked_files():
        text = _text(rel)
        if text is None:
            continue
        # Whole text, not per line: a citation may wrap (`docs/spec/core.md⏎§10.2`).
        for m in _CITATION.finditer(text):
            where = f"{rel}:{text.count(chr(10), 0, m.start()) + 1}"
            name, numbers = m[1], _SECTION_NUMBER.findall(m[2] or "")
            sections = spec_sections(name)
            if sections is None:
                bad.append(f"{where}: docs/spec/{name}.md does not exist")
                continue
            for number in numbers:
                seen += 1
                if number not in sections:
                    bad.append(f"{where}: docs/spec/{name}.md has no §{number}")
    assert not bad, "\n".join(bad)
    assert seen > 50  # the code and docs do cite the spec


_TEST_CITATION = re.compile(r"\b(tests/[\w/.-]+\.(?:py|md|jsonl|json)\b)(?:::(\w+))?")


def test_every_test_the_spec_cites_exists() -> None:
    bad, seen = [], 0
    for doc in sorted((REPO / "docs" / "spec").glob("*.md")):
        for path, name in _TEST_CITATION.findall(doc.read_text(encoding="utf-8")):
            seen += 1
            target = REPO / path
            if not target.is_file():
                bad.append(f"{doc.name}: {path} does not exist")
            elif name and not re.search(
                rf"^\s*(?:async\s+)?def {name}\b|^class {name}\b",
                target.read_text(encoding="utf-8"),
                re.MULTILINE,
            ):
                bad.append(f"{doc.name}: {path} has no {name}")
    assert not bad, "\n".join(bad)
    assert seen > 100


# Sections that summarise or point elsewhere instead of stating rules.
_NO_RULES = {"core.md": {"11", "12", "14"}, "sync.md": {"11"}}


def test_every_section_of_the_spec_cites_what_pins_it() -> None:
    for doc in sorted((REPO / "docs" / "spec").glob("*.md")):
        if doc.name == "README.md":
            continue
        text = doc.read_text(encoding="utf-8")
        # Split at numbered headings; a leaf section (no sub-sections) must cite tests.
        parts = re.split(r"^(#{2,3} \d+(?:\.\d+)*\.? .*)$", text, flags=re.MULTILINE)
        headings = parts[1::2]
        bodies = parts[2::2]
        missing = []
        for i, (heading, body) in enumerate(zip(headings, bodies, strict=True)):
            number = heading.split()[1].rstrip(".")
            nxt = headings[i + 1].split()[1].rstrip(".") if i + 1 < len(headings) else ""
            is_parent = nxt.startswith(number + ".")
            exempt = number in _NO_RULES.get(doc.name, set())
            if not is_parent and not exempt and "tests/" not in body:
                missing.append(heading)
        assert not missing, f"{doc.name}: " + "; ".join(missing)


def _strip_code(text: str) -> str:
    return _INLINE_CODE.sub("", _FENCE.sub("", text))


def _markdown_files() -> list[str]:
    return [
        rel
        for rel in tracked_files()
        if rel.endswith(".md") and (rel == "README.md" or rel.startswith("docs/"))
    ]


def test_every_relative_markdown_link_in_the_docs_resolves() -> None:
    tracked = set(tracked_files())
    tracked_dirs = {str(Path(p).parent) for p in tracked}
    for p in list(tracked_dirs):
        while p not in ("", "."):
            p = str(Path(p).parent)
            tracked_dirs.add(p)
    bad, seen = [], 0
    for rel in _markdown_files():
        text = _strip_code((REPO / rel).read_text(encoding="utf-8"))
        for target in _LINK.findall(text) + _REF_LINK.findall(text):
            if re.match(r"^[a-zA-Z][a-zA-Z0-9+.-]*:|^#|^//", target):
                continue  # a URL, a mailto:, or an anchor in the same page
            path = target.split("#", 1)[0].split("?", 1)[0]
            if not path:
                continue
            seen += 1
            resolved = (REPO / rel).parent / path
            try:
                key = resolved.resolve().relative_to(REPO.resolve()).as_posix()
            except ValueError:
                bad.append(f"{rel}: {target} leaves the repository")
                continue
            if key not in tracked and key.rstrip("/") not in tracked_dirs:
                bad.append(f"{rel}: {target} does not resolve to a tracked file")
    assert not bad, "\n".join(bad)
    assert seen > 20


def github_anchors(text: str) -> set[str]:
    """The fragment ids GitHub gives a Markdown page: each heading's slug (lower case,
    punctuation dropped, spaces to hyphens, `-1`, `-2` for repeats) and explicit
    `<a id>`/`<a name>`. A `{#id}` suffix is not one: GitHub shows it as text."""
    out: set[str] = set()
    seen: dict[str, int] = {}
    for line in _FENCE.sub("", text).splitlines():
        m = re.match(r"^#{1,6}\s+(.*?)\s*#*\s*$", line)
        if not m:
            continue
        heading = re.sub(r"`([^`]*)`", r"\1", m.group(1))
        heading = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", heading)
        slug = re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")
        n = seen.get(slug, 0)
        seen[slug] = n + 1
        out.add(slug if n == 0 else f"{slug}-{n}")
    return out | set(re.findall(r'<a\s+(?:id|name)="([^"]+)"', text))


def test_github_anchors() -> None:
    text = '## `hybrid` — the default, plus more {#hybrid}\n## A b\n## A b\n<a id="x"></a>\n'
    assert github_anchors(text) == {"hybrid--the-default-plus-more-hybrid", "a-b", "a-b-1", "x"}


def test_every_markdown_anchor_in_the_docs_resolves_on_github() -> None:
    """`page.md#frag` and `#frag` name a heading GitHub renders with that id."""
    bad, seen = [], 0
    for rel in _markdown_files():
        text = (REPO / rel).read_text(encoding="utf-8")
        for target in _LINK.findall(_strip_code(text)) + _REF_LINK.findall(_strip_code(text)):
            if re.match(r"^[a-zA-Z][a-zA-Z0-9+.-]*:|^//", target) or "#" not in target:
                continue
            path, frag = target.split("#", 1)
            page = (REPO / rel).parent / path if path else REPO / rel
            if page.suffix != ".md" or not page.is_file():
                continue
            seen += 1
            if frag not in github_anchors(page.read_text(encoding="utf-8")):
                bad.append(f"{rel}: {target}")
    assert not bad, "anchors GitHub does not render:\n" + "\n".join(bad)
    assert seen > 10


def test_the_link_checker_sees_links_and_skips_code() -> None:
    text = (
        "[a](x.md) [b](<y.md>) ![img](i.png) `[e](code.md)`\n"
        "```\n[c](fenced.md)\n```\n[d]: ref.md\n"
    )
    stripped = _strip_code(text)
    assert _LINK.findall(stripped) == ["x.md", "y.md", "i.png"]
    assert _REF_LINK.findall(stripped) == ["ref.md"]
