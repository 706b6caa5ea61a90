"""`cce knowledge embed` (argparse only; the library loads in the handler).

Lazy imports: each handler imports the library it runs, so `cce --help` and every
other command load only what they use (GitPython, the MCP SDK, tree-sitter, numpy).
"""

from __future__ import annotations

import argparse
import sys
from typing import TYPE_CHECKING, Any

from cce_knowledge.cli.common import add_dir, add_json, add_quiet
from cce_knowledge.cli.report import Report, emit
from cce_knowledge.core.errors import ConfigError

if TYPE_CHECKING:
    from cce_knowledge.config.settings import Settings

DESCRIPTION = """\
Embed the installed store's chunks for hybrid ranking (`--ranking hybrid`).

The provider comes from `knowledge.semantic` in .cce/config (provider: ollama or
openai, url, model), each key overridable by CCE_EMBED_PROVIDER, CCE_EMBED_URL and
CCE_EMBED_MODEL. An API key for an OpenAI-compatible server is read from
CCE_EMBED_API_KEY only (never stored, never printed, never sent over plain http
unless CCE_ALLOW_INSECURE_HTTP=1). Each chunk is sent after the model's document
prefix (its family's own, e.g. `search_document: ` for nomic-embed-text, or
knowledge.semantic.document_prefix).

Only chunks without a vector are sent, in batches of at most 64; a vector is keyed
by provider, model and the sha256 of the exact text sent (prefix included), so a
rebuild embeds only what changed. Vectors go to ROOT/.cce/knowledge/vectors/ (written atomically); the
store itself is never changed. A batch the provider rejects is skipped and named;
the vectors that came back are kept either way.

exit status: 0 every chunk that can be sent has a vector (binary or empty chunks
never are), 1 some are still missing or the run failed, 2 usage error"""


def register_knowledge(sub: Any) -> None:
    p = sub.add_parser(
        "embed",
        help="embed the store's chunks for hybrid ranking (local or OpenAI-compatible server)",
        description=DESCRIPTION,
    )
    add_dir(p)
    p.add_argument(
        "--rebuild",
        action="store_true",
        help="ignore stored vectors and embed every chunk again (e.g. after a model update)",
    )
    add_json(p, "the run's report as JSON")
    add_quiet(p)
    p.set_defaults(func=run)


def warn(msg: str) -> None:
    print(f"warning: {msg}", file=sys.stderr)


def embed_step(root: str, settings: Settings) -> None:
    """The embed step of `index`/`pull`: only when `knowledge.semantic` is configured;
    problems are warnings, never a failed build."""
    from cce_knowledge.semantic.build import embed_after_build

    sys.stdout.flush()
    embed_after_build(root, settings, warn=warn)


def run(args: argparse.Namespace) -> int:
    from cce_knowledge.config.settings import load_settings
    from cce_knowledge.semantic.build import embed_root, missing_note

    cfg = load_settings(args.dir).knowledge.semantic_config()
    if cfg is None:
        raise ConfigError(
            "no embedding provider configured: add `knowledge.semantic` (provider, url, "
            "model) to .cce/config or set CCE_EMBED_MODEL — see docs/semantic.md"
        )
    rep = embed_root(args.dir, cfg, rebuild=args.rebuild, warn=warn)
    text = "\n".join(
        [
            f"Embedded knowledge in {args.dir}",
            f"  provider  : {cfg.provider} ({rep.model})",
            f"  dimension : {rep.dim if rep.dim is not None else '-'}",
            f"  vectors   : {rep.embedded}/{rep.total} chunks"
            + (f" ({rep.unsendable} binary or empty, never sent)" if rep.unsendable else ""),
            f"  this run  : {rep.new} embedded, {rep.reused} reused, {rep.requests} request(s)",
        ]
    )
    # The report's keys in declaration order, as before.
    emit(args, Report(lambda: text + "\n", rep.to_json, sort_keys=False))
    note = missing_note(rep, rerun=True)
    if note:
        print(f"error: {note}", file=sys.stderr)
        return 1
    return 0
