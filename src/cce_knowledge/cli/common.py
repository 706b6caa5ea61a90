"""Small helpers shared by command modules."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from cce_knowledge.core import progress

if TYPE_CHECKING:
    from cce_knowledge.retrieval.searcher import HybridRanker
    from cce_knowledge.store.snapshots import SearchBuild


def hybrid_ranking() -> HybridRanker:
    """The hybrid ranking the edge gives a `Searcher` (imported only when used: numpy
    and the provider client cost a plain search nothing)."""
    from cce_knowledge.semantic.hybrid import HybridRanking

    return HybridRanking()


class HelpFormatter(argparse.RawDescriptionHelpFormatter):
    """Every `cce` help page's layout: descriptions as written, options aligned."""

    def __init__(self, prog: str) -> None:
        super().__init__(prog, max_help_position=30)


class Parser(argparse.ArgumentParser):
    """Every `cce` parser. argparse makes a subcommand's parser of its parent's class,
    so the help layout is named once, here, for the whole tree."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        kwargs.setdefault("formatter_class", HelpFormatter)
        super().__init__(*args, **kwargs)


def add_group(top: Any, name: str, help: str, description: str) -> Any:
    """A command group (`cce knowledge`, `cce sync`): its subcommands' action. Run
    without a subcommand, the group prints its own help (`_parser`)."""
    gp = top.add_parser(name, help=help, description=description)
    gp.set_defaults(_parser=gp)
    return gp.add_subparsers(dest="command", metavar="SUBCOMMAND")


def add_dir(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--dir",
        default=".",
        metavar="ROOT",
        help="project root holding .cce/ (default: the current directory)",
    )


def add_json(p: argparse.ArgumentParser, what: str = "the result as JSON") -> None:
    """`--json`: the command's output for programs (never parse the human text)."""
    p.add_argument("--json", action="store_true", help=f"print {what}")


#: The knowledge commands' remote chain (docs/spec/sync.md §3.3).
REMOTE_HELP = "cache repository URL (overrides knowledge.sync.remote / sync.remote)"


def add_remote(
    p: argparse.ArgumentParser, help: str = REMOTE_HELP, *, required: bool = False
) -> None:
    """`--remote URL`: the git cache repository."""
    p.add_argument("--remote", metavar="URL", required=required, help=help)


def add_corpus(
    p: argparse.ArgumentParser, help: str = "corpus id (default: knowledge.sync.corpus_id)"
) -> None:
    """`--corpus ID`: which corpus of the cache."""
    p.add_argument("--corpus", metavar="ID", help=help)


def add_switches(p: argparse.ArgumentParser, *switches: tuple[str, str]) -> None:
    """On/off options (`store_true`), declared as (flag, help) rows in --help's order."""
    for flag, help in switches:
        p.add_argument(flag, action="store_true", help=help)


def add_seconds(
    p: argparse.ArgumentParser,
    flag: str,
    default: int,
    help: str,
    *,
    type: Callable[[str], float] = float,
) -> None:
    """A duration option in seconds; its help ends with the default, written once."""
    p.add_argument(
        flag,
        type=type,
        default=float(default),
        metavar="SECONDS",
        help=f"{help} (default: {default})",
    )


def add_quiet(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "-q",
        "--quiet",
        action="store_true",
        help="no progress on stderr (a bar on a terminal, a line every few seconds otherwise)",
    )


def report_search_build(built: SearchBuild | None) -> None:
    """The search-index step's line on stderr (stdout keeps the reference's lines)."""

    sys.stdout.flush()
    if built is None or not built.built:
        return
    if built.error is not None:
        print(
            f"warning: the search index could not be built ({built.error}); "
            "the first search will build it",
            file=sys.stderr,
        )
        return
    progress.note(f"search index: built in {built.seconds:.1f} s ({built.size / 1e6:.1f} MB)")
