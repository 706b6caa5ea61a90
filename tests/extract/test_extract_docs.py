"""Docs adapter against git repositories the tests create (GitPython)."""

from __future__ import annotations

import os
from pathlib import Path

import git
import pytest

from cce_knowledge.cli.main import main
from cce_knowledge.contract.ndjson import parse_feed
from cce_knowledge.core.errors import ExtractError
from cce_knowledge.extract.docs import DocsOptions, extract_docs
from cce_knowledge.extract.feed import feed_bytes
from cce_knowledge.extract.gitmeta import web_url
from tests.helpers.schemas import assert_feed_valid

WHO = git.Actor("Doc Writer", "docs@example.com")


def commit(repo: git.Repo, msg: str, when: str) -> str:
    import datetime as dt

    d = dt.datetime.fromisoformat(when)
    off = d.utcoffset() or dt.timedelta(0)
    mins = int(off.total_seconds()) // 60
    when = (
        f"{int(d.timestamp())} {'+' if mins >= 0 else '-'}{abs(mins) // 60:02d}{abs(mins) % 60:02d}"
    )
    repo.git.add(A=True)
    c = repo.index.commit(msg, author=WHO, committer=WHO, author_date=when, commit_date=when)
    return c.hexsha


def write(root: Path, rel: str, text: str | bytes) -> None:
    p = root / rel
    p.parent.mkdir(parents=True, exist_ok=True)
    if isinstance(text, bytes):
        p.write_bytes(text)
    else:
        p.write_text(text, encoding="utf-8")


@pytest.fixture
def docs_repo(tmp_path: Path) -> tuple[Path, dict[str, str]]:
    root = tmp_path / "repo"
    root.mkdir()
    repo = git.Repo.init(root)
    write(
        root,
        "README.md",
        "---\ntitle: Checkout policy\ntags: [policy, auth]\n"
        "group: Payments\n---\n# Checkout policy\n\nRetries are capped.\n",
    )
    write(root, "guide/intro.md", "\n# Intro guide\n\nWelcome.\n\n## Setup\n\nDo it.\n")
    write(root, "guide/setext.markdown", "Setext title\n============\n\nBody.\n")
    write(root, "notes/plain.md", "Just text, no heading.\n")
    write(root, "notes/crlf.md", b"# Windows\r\n\r\nLine one.\r\nLine two.\r\n")
    write(root, "notes/late-heading.md", "Preamble first.\n\n## Later heading\n\nText.\n")
    write(root, "node_modules/pkg/readme.md", "# vendored\n")
    write(root, "vendor/lib/readme.md", "# vendored\n")
    write(root, ".github/hidden.md", "# hidden\n")
    write(root, "notes/.draft.md", "# hidden file\n")
    write(root, "notes/skip.txt", "# not markdown\n")
    shas = {"first": commit(repo, "first", "2024-03-01T10:00:00+02:00")}
    write(root, "guide/intro.md", "\n# Intro guide\n\nWelcome back.\n\n## Setup\n\nDo it.\n")
    shas["second"] = commit(repo, "second", "2024-04-02T12:30:00+00:00")
    repo.create_tag("v1")
    repo.close()
    return root, shas


def by_id(data: bytes) -> dict[str, object]:
    return {r.id: r for r in parse_feed(data.decode())}


def test_one_record_per_markdown_file(docs_repo: tuple[Path, dict[str, str]]) -> None:
    root, shas = docs_repo
    recs = extract_docs(DocsOptions(root=str(root)))
    assert [r.id for r in recs] == [
        "docs:README.md",
        "docs:guide/intro.md",
        "docs:guide/setext.markdown",
        "docs:notes/crlf.md",
        "docs:notes/late-heading.md",
        "docs:notes/plain.md",
    ]
    r = {x.id: x for x in recs}
    readme = r["docs:README.md"]
    assert (readme.title, readme.labels, readme.group) == (
        "Checkout policy",
        ["policy", "auth"],
        "Payments",
    )
    assert readme.body == "Retries are capped.\n"  # frontmatter and repeated H1 removed
    intro = r["docs:guide/intro.md"]
    assert intro.title == "Intro guide" and intro.body.startswith("Welcome back.")
    assert intro.updated_at == "2024-04-02T12:30:00Z"
    assert readme.updated_at == "2024-03-01T08:00:00Z"  # committer date in UTC
    assert r["docs:guide/setext.markdown"].title == "Setext title"
    assert r["docs:guide/setext.markdown"].body == "Body.\n"
    assert r["docs:notes/plain.md"].title == "plain"
    assert r["docs:notes/late-heading.md"].title == "Later heading"
    assert r["docs:notes/late-heading.md"].body.startswith("Preamble first.")
    crlf = r["docs:notes/crlf.md"]
    assert crlf.body == "Line one.\nLine two.\n" and crlf.title == "Windows"
    assert all(x.url is None for x in recs)  # no remote: no web URL
    write(root, "notes/uncommitted.md", "# Draft\n")
    (draft,) = [x for x in extract_docs(DocsOptions(root=str(root))) if "uncommitted" in x.id]
    assert draft.updated_at is None and draft.title == "Draft"
    assert all(x.source == "docs" for x in recs)
    assert shas["second"] != shas["first"]


def test_url_points_at_the_last_commit_on_a_known_host(
    docs_repo: tuple[Path, dict[str, str]],
) -> None:
    root, shas = docs_repo
    repo = git.Repo(root)
    repo.create_remote("origin", "git@github.com:acme/handbook.git")
    repo.close()
    r = {x.id: x for x in extract_docs(DocsOptions(root=str(root / "guide"), id_prefix="hb:"))}
    assert set(r) == {"hb:intro.md", "hb:setext.markdown"}
    assert (
        r["hb:intro.md"].url
        == f"https://github.com/acme/handbook/blob/{shas['second']}/guide/intro.md"
    )
    assert r["hb:setext.markdown"].url == (
        f"https://github.com/acme/handbook/blob/{shas['first']}/guide/setext.markdown"
    )


def test_clone_at_ref_and_determinism(
    docs_repo: tuple[Path, dict[str, str]], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    root, shas = docs_repo
    url = root.resolve().as_uri()
    a, b = tmp_path / "a.jsonl", tmp_path / "b.jsonl"
    assert (
        main(["knowledge", "extract", "docs", "--repo", url, "--ref", "v1", "--out", str(a)]) == 0
    )
    assert main(["knowledge", "extract", "docs", "--root", str(root), "--out", str(b), "-q"]) == 0
    assert a.read_bytes() == b.read_bytes()  # a clone and the work tree agree byte for byte
    assert (
        main(
            [
                "knowledge",
                "extract",
                "docs",
                "--repo",
                url,
                "--ref",
                shas["first"],
                "--url-base",
                "https://git.example/docs/raw",
            ]
        )
        == 0
    )
    out = capsys.readouterr().out.encode()
    old = by_id(out)["docs:guide/intro.md"]
    assert old.body.startswith("Welcome.")  # type: ignore[attr-defined]
    assert old.url == f"https://git.example/docs/raw/{shas['first']}/guide/intro.md"  # type: ignore[attr-defined]
    assert main(["knowledge", "extract", "docs", "--repo", url, "--ref", "no-such-ref"]) == 1
    assert "--ref no-such-ref not found" in capsys.readouterr().err


def test_glob_exclude_and_symlinks(docs_repo: tuple[Path, dict[str, str]], tmp_path: Path) -> None:
    root, _ = docs_repo
    outside = tmp_path / "secret.md"
    outside.write_text("# outside\n")
    os.symlink(outside, root / "notes" / "escape.md")
    os.symlink(root / "README.md", root / "notes" / "alias.md")
    os.symlink(tmp_path, root / "loop")
    warnings: list[str] = []
    recs = extract_docs(
        DocsOptions(root=str(root), globs=["notes/**/*.md", "*.md"], exclude=["notes/late-*"]),
        warn=warnings.append,
    )
    ids = [r.id for r in recs]
    assert ids == [
        "docs:README.md",
        "docs:notes/alias.md",
        "docs:notes/crlf.md",
        "docs:notes/plain.md",
    ]
    assert any("escape.md" in w and "outside" in w for w in warnings)


def test_bad_input_names_file_and_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    write(tmp_path, "a.md", "---\ntitle: ok\ntags: [unclosed\n---\nbody\n")
    assert (
        main(
            [
                "knowledge",
                "extract",
                "docs",
                "--root",
                str(tmp_path),
                "--out",
                str(tmp_path / "out.jsonl"),
            ]
        )
        == 1
    )
    err = capsys.readouterr().err
    assert f"{tmp_path}/a.md: line " in err and "invalid YAML frontmatter" in err
    assert not (tmp_path / "out.jsonl").exists()
    (tmp_path / "a.md").write_bytes(b"# ok\n\nbad \xff byte\n")
    with pytest.raises(ExtractError, match=r"a\.md: line 3: not valid UTF-8"):
        extract_docs(DocsOptions(root=str(tmp_path)))
    (tmp_path / "a.md").write_text("---\ntitle: never closed\n")
    with pytest.raises(ExtractError, match="never closed"):
        extract_docs(DocsOptions(root=str(tmp_path)))


def test_feed_validates_and_indexes(
    docs_repo: tuple[Path, dict[str, str]], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    root, _ = docs_repo
    feed, man = tmp_path / "docs.jsonl", tmp_path / "docs.manifest.json"
    assert (
        main(
            [
                "knowledge",
                "extract",
                "docs",
                "--root",
                str(root),
                "--out",
                str(feed),
                "--manifest",
                str(man),
            ]
        )
        == 0
    )
    data = feed.read_bytes()
    assert_feed_valid(data)
    assert data == feed_bytes(parse_feed(data.decode()))  # canonical: re-encoding is identical
    proj = tmp_path / "proj"
    proj.mkdir()
    capsys.readouterr()
    assert main(["knowledge", "index", str(feed), "--dir", str(proj), "--manifest", str(man)]) == 0
    assert "records   : 6" in capsys.readouterr().out


@pytest.mark.parametrize(
    ("remote", "want"),
    [
        ("https://github.com/acme/docs.git", "https://github.com/acme/docs"),
        ("https://x-access-token:SECRET@github.com/acme/docs", "https://github.com/acme/docs"),
        ("git@github.com:acme/docs.git", "https://github.com/acme/docs"),
        ("ssh://git@gitlab.com/group/sub/docs.git", "https://gitlab.com/group/sub/docs"),
        ("file:///srv/git/docs.git", None),
        ("/srv/git/docs.git", None),
        ("../docs", None),
        (None, None),
    ],
)
def test_web_url(remote: str | None, want: str | None) -> None:
    assert web_url(remote) == want


def test_gitlab_blob_path(tmp_path: Path) -> None:
    repo = git.Repo.init(tmp_path)
    write(tmp_path, "a.md", "# A\n")
    sha = commit(repo, "a", "2024-01-01T00:00:00+00:00")
    repo.create_remote("origin", "https://gitlab.com/group/docs.git")
    repo.close()
    (rec,) = extract_docs(DocsOptions(root=str(tmp_path)))
    assert rec.url == f"https://gitlab.com/group/docs/-/blob/{sha}/a.md"
