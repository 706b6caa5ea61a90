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
import threading
import urllib.parse
import zlib
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
        timeout: float | None = None,
    ) -> None:
        env = os.environ if env is None else env
        self.cfg = cfg
        self.url = endpoint(cfg)
        self.display = display_url(self.url)
        self.requests = 0
        self.dim: int | None = None
        #: The whole request's deadline (seconds): knowledge.semantic.timeout.
        self._timeout = cfg.timeout if timeout is None else timeout
        self._client: httpx.Client | None = None
        self._headers = {
            "Content-Type": "application/json",
            "Accept": "application/json",
            # Only what _Decoder decodes (httpx would offer br and zstd when installed).
            "Accept-Encoding": "gzip, deflate",
        }
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
        if not texts:
            return []
        if len(texts) > MAX_BATCH:
            raise ValueError(f"at most {MAX_BATCH} texts per request")
        body = json.dumps({"model": self.cfg.model, "input": list(texts)}, ensure_ascii=False)
        self.requests += 1
        status, data = self._post(body.encode("utf-8"))
        if 300 <= status < 400:
            raise ProviderError(f"{self.display}: HTTP {status} redirect refused")
        if status != 200:
            detail = _escape(self._scrub(bytes(data).decode("utf-8", "replace")))
            raise ProviderError(f"{self.display}: HTTP {status}: {detail}")
        try:
            doc = json.loads(bytes(data))
        except (ValueError, UnicodeDecodeError, RecursionError) as e:
            # RecursionError: `[` nested past the interpreter's limit (json recurses).
            raise ProviderError(f"{self.display}: answer is not JSON (or nested too deeply)") from e
        return self._vectors(doc, len(texts))

    def _post(self, body: bytes) -> tuple[int, bytearray]:
        """(status, decoded body) of one POST, within the total deadline.

        httpx's timeouts bound each read, so a server dripping a byte at a time would
        hold a request forever: the exchange runs on a worker thread and the caller
        waits at most `timeout` seconds in all (connect, DNS, headers, body). A worker
        left behind stops at its next read (it is told to) or at httpx's own timeout,
        and takes its connection pool with it."""
        call = _Call(self, body)
        worker = threading.Thread(target=call.run, name="cce-embed", daemon=True)
        worker.start()
        if not call.done.wait(self._timeout):
            call.abandon()
            self._client = None  # the worker closes the abandoned client when it ends
            raise ProviderUnreachable(
                f"{self.display}: no complete answer within {self._timeout:g} s "
                "(knowledge.semantic.timeout)"
            )
        if call.error is not None:
            raise call.error
        return call.status, call.data

    def _exchange(self, client: httpx.Client, body: bytes, call: _Call) -> None:
        import httpx

        try:
            with client.stream("POST", self.url, content=body, headers=self._headers) as resp:
                call.status = resp.status_code
                dec = _Decoder(resp.headers.get("content-encoding"), self.display)
                for part in resp.iter_raw():
                    if call.abandoned.is_set():
                        return
                    dec.feed(part)
                dec.finish()
                call.data = dec.data
        except httpx.TimeoutException as e:
            raise ProviderUnreachable(
                f"{self.display}: no answer within {self._timeout:g} s"
            ) from e
        except httpx.TransportError as e:
            raise ProviderUnreachable(
                f"{self.display}: unreachable ({self._scrub(type(e).__name__)})"
            ) from e

    def _vectors(self, doc: Any, n: int) -> list[list[float]]:
        raw = self._ollama_rows(doc) if self.cfg.provider == "ollama" else self._openai_rows(doc)
        if len(raw) != n:
            raise ProviderError(f"{self.display}: {len(raw)} vectors for {n} inputs")
        out: list[list[float]] = []
        for i, v in enumerate(raw):
            row = finite_row(v)
            if row is None:
                raise ProviderError(
                    f"{self.display}: vector {i} is not a list of at most {MAX_DIM} finite "
                    "numbers of finite norm"
                )
            if self.dim is None:
                self.dim = len(row)
            elif len(row) != self.dim:
                raise ProviderError(
                    f"{self.display}: vector {i} has dimension {len(row)}, expected {self.dim}"
                )
            out.append(row)
        return out

    def _ollama_rows(self, doc: Any) -> list[Any]:
        got = doc.get("embeddings") if isinstance(doc, dict) else None
        if not isinstance(got, list):
            raise ProviderError(f"{self.display}: answer has no `embeddings` list")
        return got

    def _openai_rows(self, doc: Any) -> list[Any]:
        items = doc.get("data") if isinstance(doc, dict) else None
        if not isinstance(items, list):
            raise ProviderError(f"{self.display}: answer has no `data` list")
        raw: list[Any] = [None] * len(items)
        for pos, it in enumerate(items):
            if not isinstance(it, dict):
                raise ProviderError(f"{self.display}: data[{pos}] is not an object")
            idx = it.get("index", pos)
            if type(idx) is not int or not 0 <= idx < len(items) or raw[idx] is not None:
                raise ProviderError(f"{self.display}: data[{pos}].index is invalid")
            raw[idx] = it.get("embedding")
        return raw


def finite_row(v: Any) -> list[float] | None:
    """`v` as floats when it is a non-empty list of at most MAX_DIM JSON numbers, each
    finite as a float and with a finite sum of squares; None otherwise. A 400-digit
    integer is valid JSON but no float (OverflowError): it is refused here, not raised."""
    if not isinstance(v, list) or not 0 < len(v) <= MAX_DIM:
        return None
    out: list[float] = []
    sq = 0.0
    for x in v:
        if type(x) is int:
            try:
                f = float(x)
            except OverflowError:
                return None
        elif type(x) is float:
            f = x
        else:
            return None
        sq += f * f  # float overflow gives inf (no exception), caught below
        out.append(f)
    return out if math.isfinite(sq) else None


class _Call:
    """One request on its worker thread: what came back, or the error it raised."""

    def __init__(self, provider: Provider, body: bytes) -> None:
        self.provider = provider
        self.client = provider._http()
        self.body = body
        self.done = threading.Event()
        self.abandoned = threading.Event()
        self._lock = threading.Lock()  # whoever comes second closes the client
        self.status = 0
        self.data = bytearray()
        self.error: ProviderError | None = None

    def abandon(self) -> None:
        with self._lock:
            self.abandoned.set()
            if self.done.is_set():
                self.client.close()

    def run(self) -> None:
        try:
            self.provider._exchange(self.client, self.body, self)
        except ProviderError as e:
            self.error = e
        except Exception as e:
            self.error = ProviderError(
                f"{self.provider.display}: {self.provider._scrub(type(e).__name__)}"
            )
        finally:
            with self._lock:
                self.done.set()
                if self.abandoned.is_set():
                    self.client.close()


#: One content coding of an answer is decoded (by us, so every decoded byte counts
#: against MAX_RESPONSE_BYTES as it is produced); `gzip, gzip` has no use here.
_CODINGS = {"gzip", "x-gzip", "deflate"}


class _Decoder:
    """An answer's body, decoded and capped at MAX_RESPONSE_BYTES decoded bytes.

    httpx decodes a chunk in one call, so a stacked `Content-Encoding: gzip, gzip`
    expands a 1.8 KB body to gigabytes before any count could stop it. Here zlib
    never produces more than what is left under the cap, and a stacked or unknown
    coding is refused before a byte is decoded."""

    def __init__(self, header: str | None, display: str) -> None:
        codings = [c.strip().lower() for c in (header or "").split(",")]
        codings = [c for c in codings if c and c != "identity"]
        self.display = display
        self.data = bytearray()
        self._z: Any = None
        if len(codings) > 1:
            raise ProviderError(
                f"{display}: stacked content codings refused ({_escape(', '.join(codings), 80)})"
            )
        if codings and codings[0] not in _CODINGS:
            raise ProviderError(f"{display}: content coding {_escape(codings[0], 40)!r} refused")
        if codings:
            self._z = zlib.decompressobj(zlib.MAX_WBITS | 32)  # gzip or zlib header

    def _add(self, out: bytes) -> None:
        self.data += out
        if len(self.data) > MAX_RESPONSE_BYTES:
            raise ProviderError(f"{self.display}: answer larger than {MAX_RESPONSE_BYTES} bytes")

    def _room(self) -> int:
        """At most one step more than the cap allows, in pieces of 1 MiB (the pieces
        are copied into `data`, so a piece is extra memory while it lives)."""
        return min(MAX_RESPONSE_BYTES + 1 - len(self.data), 1 << 20)

    def feed(self, raw: bytes) -> None:
        if self._z is None:
            self._add(raw)
            return
        buf = raw
        try:
            while buf:
                self._add(self._z.decompress(buf, self._room()))
                if self._z.eof:  # gzip may hold several members, one after the other
                    buf = self._z.unused_data
                    self._z = zlib.decompressobj(zlib.MAX_WBITS | 32)
                else:
                    buf = self._z.unconsumed_tail
        except zlib.error as e:
            raise ProviderError(f"{self.display}: answer is not valid gzip/deflate") from e

    def finish(self) -> None:
        if self._z is not None:
            try:
                while out := self._z.flush(self._room()):
                    self._add(out)
            except zlib.error as e:
                raise ProviderError(f"{self.display}: answer is not valid gzip/deflate") from e
