"""Embedding providers over HTTP: Ollama's `/api/embed` and OpenAI-compatible `/v1/embeddings`.

Everything a provider answers is untrusted: the body must be JSON of the documented
shape, one finite vector per input, all of one dimension. Redirects are refused (a
credential goes only to the origin it was configured for). The API key comes from
CCE_EMBED_API_KEY, is sent to the openai provider only, never over plain http unless
CCE_ALLOW_INSECURE_HTTP=1, and never appears in a message, in any form it may be
echoed in (core/secrets.py).

Lazy imports: httpx (~60 ms) loads only when a provider is really asked.
"""

from __future__ import annotations

import json
import math
import os
import urllib.parse
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from cce_knowledge.core.errors import CceError
from cce_knowledge.core.secrets import EMBED_API_KEY_ENV, scrub, secret_forms
from cce_knowledge.core.urls import display_url

if TYPE_CHECKING:
    import httpx

    from cce_knowledge.config.settings import SemanticSettings

API_KEY_ENV = EMBED_API_KEY_ENV
INSECURE_ENV = "CCE_ALLOW_INSECURE_HTTP"
#: At most this many texts per request (providers cap batches; 64 is safe for all).
MAX_BATCH = 64
#: A provider's answer larger than this is refused (64 texts × 8k dims × ~20 bytes).
MAX_RESPONSE_BYTES = 16 * 1024 * 1024
MAX_DIM = 16_384
TIMEOUT_S = 120.0


class ProviderError(CceError):
    """The provider refused a request or answered something unusable."""


class ProviderUnreachable(ProviderError):
    """No answer at all (connection refused, DNS, timeout): later requests would fail too."""


def _escape(text: str, limit: int = 200) -> str:
    """Printable, bounded text of a hostile error body."""
    out = []
    for ch in text[:limit]:
        o = ord(ch)
        out.append(ch if 0x20 <= o < 0x7F or o > 0x9F else f"\\x{o:02x}")
    return "".join(out) + ("…" if len(text) > limit else "")


def endpoint(cfg: SemanticSettings) -> str:
    base = cfg.url.rstrip("/")
    if cfg.provider == "ollama":
        return f"{base}/api/embed"
    # An OpenAI-compatible base may be given with or without its /v1.
    return f"{base}/embeddings" if base.endswith("/v1") else f"{base}/v1/embeddings"


class Provider:
    """One configured provider; counts the requests it makes."""

    def __init__(
        self,
        cfg: SemanticSettings,
        *,
        env: Mapping[str, str] | None = None,
        timeout: float = TIMEOUT_S,
    ) -> None:
        env = os.environ if env is None else env
        self.cfg = cfg
        self.url = endpoint(cfg)
        self.display = display_url(self.url)
        self.requests = 0
        self.dim: int | None = None
        self._timeout = timeout
        self._client: httpx.Client | None = None
        self._headers = {"Content-Type": "application/json", "Accept": "application/json"}
        self.key_note: str | None = None
        key = env.get(API_KEY_ENV) or ""
        # Every form the key may be echoed in (percent-encoded, base64, cased...).
        self._key_forms = secret_forms(key) if key else []
        if key and cfg.provider == "openai":
            scheme = urllib.parse.urlsplit(self.url).scheme.lower()
            if scheme == "https" or env.get(INSECURE_ENV) == "1":
                self._headers["Authorization"] = f"Bearer {key}"
            else:
                self.key_note = (
                    f"{API_KEY_ENV} is not sent to {self.display} over plain http "
                    f"(set {INSECURE_ENV}=1 to allow it)"
                )

    def _http(self) -> httpx.Client:
        if self._client is None:
            import httpx

            # Redirects are never followed: an Authorization header must not travel to
            # another origin, and a provider has no reason to redirect.
            self._client = httpx.Client(timeout=self._timeout, follow_redirects=False)
        return self._client

    def close(self) -> None:
        if self._client is not None:
            self._client.close()
            self._client = None

    def __enter__(self) -> Provider:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _scrub(self, text: str) -> str:
        return scrub(text, self._key_forms)

    def embed(self, texts: Sequence[str]) -> list[list[float]]:
        """One request: a vector per text, in order. Raises ProviderError/ProviderUnreachable."""
        import httpx

        if not texts:
            return []
        if len(texts) > MAX_BATCH:
            raise ValueError(f"at most {MAX_BATCH} texts per request")
        body = json.dumps({"model": self.cfg.model, "input": list(texts)}, ensure_ascii=False)
        self.requests += 1
        try:
            with self._http().stream(
                "POST", self.url, content=body.encode("utf-8"), headers=self._headers
            ) as resp:
                data = bytearray()
                for part in resp.iter_bytes():
                    data += part
                    if len(data) > MAX_RESPONSE_BYTES:
                        raise ProviderError(
                            f"{self.display}: answer larger than {MAX_RESPONSE_BYTES} bytes"
                        )
                status = resp.status_code
        except httpx.TimeoutException as e:
            raise ProviderUnreachable(
                f"{self.display}: no answer within {self._timeout:g} s"
            ) from e
        except httpx.TransportError as e:
            raise ProviderUnreachable(
                f"{self.display}: unreachable ({self._scrub(type(e).__name__)})"
            ) from e
        if 300 <= status < 400:
            raise ProviderError(f"{self.display}: HTTP {status} redirect refused")
        if status != 200:
            detail = _escape(self._scrub(bytes(data).decode("utf-8", "replace")))
            raise ProviderError(f"{self.display}: HTTP {status}: {detail}")
        try:
            doc = json.loads(bytes(data))
        except (ValueError, UnicodeDecodeError) as e:
            raise ProviderError(f"{self.display}: answer is not JSON") from e
        vecs = self._vectors(doc, len(texts))
        return vecs

    def _vectors(self, doc: Any, n: int) -> list[list[float]]:
        if self.cfg.provider == "ollama":
            got = doc.get("embeddings") if isinstance(doc, dict) else None
            if not isinstance(got, list):
                raise ProviderError(f"{self.display}: answer has no `embeddings` list")
            raw = got
        else:
            items = doc.get("data") if isinstance(doc, dict) else None
            if not isinstance(items, list):
                raise ProviderError(f"{self.display}: answer has no `data` list")
            raw = [None] * len(items)
            for pos, it in enumerate(items):
                if not isinstance(it, dict):
                    raise ProviderError(f"{self.display}: data[{pos}] is not an object")
                idx = it.get("index", pos)
                if type(idx) is not int or not 0 <= idx < len(items) or raw[idx] is not None:
                    raise ProviderError(f"{self.display}: data[{pos}].index is invalid")
                raw[idx] = it.get("embedding")
        if len(raw) != n:
            raise ProviderError(f"{self.display}: {len(raw)} vectors for {n} inputs")
        out: list[list[float]] = []
        for i, v in enumerate(raw):
            if not isinstance(v, list) or not v or len(v) > MAX_DIM:
                raise ProviderError(f"{self.display}: vector {i} is not a list of numbers")
            if not all(type(x) in (int, float) and math.isfinite(x) for x in v):
                raise ProviderError(f"{self.display}: vector {i} has a non-finite value")
            if self.dim is None:
                self.dim = len(v)
            elif len(v) != self.dim:
                raise ProviderError(
                    f"{self.display}: vector {i} has dimension {len(v)}, expected {self.dim}"
                )
            out.append([float(x) for x in v])
        return out
