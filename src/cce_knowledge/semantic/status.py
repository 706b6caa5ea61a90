"""What `status`, `doctor` and MCP `index_status` say about semantic retrieval."""

from __future__ import annotations

import os
from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, Any

from cce_knowledge.core.errors import CceError
from cce_knowledge.core.urls import display_url
from cce_knowledge.semantic.build import last_run
from cce_knowledge.store.vectors import VectorFile, list_files, model_key

if TYPE_CHECKING:
    from pathlib import Path

    from cce_knowledge.config.settings import SemanticSettings, Settings


@dataclass
class SemanticStatus:
    provider: str | None  # configured provider (None: not configured)
    url: str | None
    model: str | None
    dim: int | None  # of the configured model's vectors for the active snapshot
    embedded: int  # chunks with a vector
    total: int  # live chunks of the active snapshot (0 when unknown)
    last_run_requests: int | None
    last_run_model: str | None
    #: models of other vectors files for this snapshot (made with another model)
    other_models: list[str] = field(default_factory=list)
    #: chunks that are never sent (binary or empty), as the last embed run of this
    #: snapshot and model counted them (0 when no such run is recorded)
    unsendable: int = 0
    problem: str | None = None  # a config error, or vectors that cannot be read

    def to_json_obj(self) -> dict[str, Any]:
        return asdict(self)

    def complete(self) -> bool:
        """Every chunk that can be sent has a vector of the configured model."""
        return bool(self.total) and self.embedded + self.unsendable >= self.total

    def never_sent(self) -> str:
        return f" ({self.unsendable} binary or empty, never sent)" if self.unsendable else ""

    def lines(self) -> list[str]:
        """`key : value` lines for the human reports."""
        if self.provider is None:
            prov = "- (knowledge.semantic not configured)"
        else:
            prov = f"{self.provider} {self.url} · model {self.model}"
        out = [f"  semantic       : {prov}"]
        if self.problem:
            out.append(f"  vectors        : - ({self.problem})")
        elif self.model is not None and self.dim:
            out.append(
                f"  vectors        : {self.embedded}/{self.total} chunks · {self.dim} dims"
                + self.never_sent()
            )
        elif self.model is not None:
            # No vectors file for this model: the chunk count is not known here.
            out.append("  vectors        : none yet — run `cce knowledge embed`")
        if self.last_run_requests is not None:
            out.append(
                f"  last embed run : {self.last_run_requests} request(s) ({self.last_run_model})"
            )
        if self.other_models:
            out.append(f"  other vectors  : {', '.join(self.other_models)}")
        return out


def semantic_status(
    root: str | os.PathLike[str], snapshot: str, settings: Settings
) -> SemanticStatus | None:
    """None when semantic retrieval is neither configured nor has left vectors behind.
    `settings`: the root's, loaded by the caller."""

    problem = None
    try:
        cfg = settings.knowledge.semantic_config()
    except CceError as e:
        cfg, problem = None, e.message
    files = [(mk, p) for snap, mk, p in list_files(root) if snap == snapshot]
    if cfg is None and not files and problem is None:
        return None
    st = SemanticStatus(
        provider=cfg.provider if cfg else None,
        url=None,
        model=cfg.model if cfg else None,
        dim=None,
        embedded=0,
        total=0,
        last_run_requests=None,
        last_run_model=None,
        problem=problem,
    )
    if cfg is not None:
        st.url = display_url(cfg.url)
    _read_vectors(st, cfg, files)
    _read_last_run(st, cfg, root, snapshot)
    return st


def _read_vectors(
    st: SemanticStatus, cfg: SemanticSettings | None, files: list[tuple[str, Path]]
) -> None:
    """Coverage of the configured model's file; other models' files by name."""
    want = model_key(cfg.model) if cfg else None
    for mk, path in files:
        try:
            vf = VectorFile.open(path)
        except CceError as e:
            if mk == want:
                st.problem = e.message
            continue
        if cfg is not None and mk == want and vf.meta.model == cfg.model:
            st.dim = vf.meta.dim
            st.embedded = vf.present()
            st.total = vf.meta.count
        else:
            st.other_models.append(vf.meta.model)


def _read_last_run(
    st: SemanticStatus, cfg: SemanticSettings | None, root: str | os.PathLike[str], snapshot: str
) -> None:
    """What the last embed run said (requests, model, chunks it could not send)."""
    run = last_run(root)
    if run is None:
        return
    req, model = run.get("requests"), run.get("model")
    st.last_run_requests = req if isinstance(req, int) else None
    st.last_run_model = model if isinstance(model, str) else None
    uns = run.get("unsendable")
    if (
        cfg is not None
        and st.dim is not None
        and model == cfg.model
        and run.get("snapshot") == snapshot
        and type(uns) is int
        and 0 <= uns <= st.total - st.embedded
    ):
        st.unsendable = uns
