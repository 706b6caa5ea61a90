"""What one record may cost to index (issue 34, point 3).

Every stored chunk repeats its breadcrumb `name` (the text of each enclosing heading),
the record's facets (title, labels, links, …) and an embedding of a few kilobytes. So a
record's output grows with heading length × number of headings, and with the number of
chunks × the facets: one 1 MiB record of 200,000 `## h` lines, or a 1 MiB title over
1,500 headings, asked for gigabytes. The breadcrumb format is the reference's and stays;
what one record may cost is bounded instead, in proportion to its size `S` (the rendered
document's UTF-8 bytes plus its facets' bytes):

- chunks: at most `64 + S / 64` (the Rust RFCs make one chunk per 230 bytes at most);
- breadcrumb bytes, summed over the record's chunk names: at most `64 KiB + 4·S`;
- output bytes, estimated from below as each chunk's text and name plus, per chunk, the
  facets and `CHUNK_OVERHEAD` (an embedding and the JSON keys: at least ~3.7 KB, at most
  ~8 KB): at most `256 KiB + 32·S` (the RFCs reach 18·S).

The chunkers count as they go and raise `RecordCostError` before they build what is past
a bound, so a refused record costs at most its bounds. Ordinary input never comes near
them, and its bytes are the reference's.
"""

from __future__ import annotations

from dataclasses import dataclass

from cce_knowledge.contract.record import KnowledgeRecord

CHUNK_FLOOR = 64
BYTES_PER_CHUNK = 64
NAME_FLOOR = 64 << 10
NAME_RATIO = 4
OUTPUT_FLOOR = 256 << 10
OUTPUT_RATIO = 32
#: Bytes each stored chunk carries beyond its text, name and facets (JSON keys and the
#: embedding): a lower bound (measured: 3,757 bytes for an empty record's one chunk).
CHUNK_OVERHEAD = 3_584


class RecordCostError(ValueError):
    """A record past one of its bounds; `reason` says which, in words."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


@dataclass(frozen=True, slots=True)
class RecordBudget:
    """The bounds of one record (see the module)."""

    max_chunks: int
    max_name_bytes: int
    max_output_bytes: int
    #: bytes every chunk of this record repeats: its facets and CHUNK_OVERHEAD
    per_chunk: int

    @classmethod
    def for_record(cls, doc_bytes: int, facet_bytes: int) -> RecordBudget:
        size = doc_bytes + facet_bytes
        return cls(
            max_chunks=CHUNK_FLOOR + size // BYTES_PER_CHUNK,
            max_name_bytes=NAME_FLOOR + NAME_RATIO * size,
            max_output_bytes=OUTPUT_FLOOR + OUTPUT_RATIO * size,
            per_chunk=facet_bytes + CHUNK_OVERHEAD,
        )

    @classmethod
    def of_record(cls, doc: str, rec: KnowledgeRecord) -> RecordBudget:
        """The bounds of `rec`, rendered as `doc`; its facets (everything a chunk repeats
        but its text) measured as stored."""
        facets = [rec.id, rec.title, rec.source, *rec.labels, *rec.links]
        facets += [
            v for v in (rec.url, rec.state, rec.state_reason, rec.updated_at, rec.group) if v
        ]
        return cls.for_record(len(doc.encode("utf-8")), sum(len(v.encode("utf-8")) for v in facets))

    def meter(self) -> CostMeter:
        return CostMeter(self)


class CostMeter:
    """Counts one record's chunks, breadcrumb bytes and output as a chunker makes them."""

    __slots__ = ("budget", "chunks", "names", "output")

    def __init__(self, budget: RecordBudget) -> None:
        self.budget = budget
        self.chunks = 0
        self.names = 0
        self.output = 0

    def name(self, nbytes: int) -> None:
        """Before a breadcrumb name of `nbytes` bytes is built."""
        self.names += nbytes
        if self.names > self.budget.max_name_bytes:
            raise RecordCostError(
                f"its heading breadcrumbs come to more than {self.budget.max_name_bytes} "
                f"bytes (64 KiB + 4x the record's {self._size()} bytes): each chunk's name "
                "repeats the text of its enclosing headings"
            )

    def chunk(self, content_bytes: int, name_bytes: int) -> None:
        """After a chunk of `content_bytes` named by `name_bytes` bytes is cut."""
        self.chunks += 1
        b = self.budget
        if self.chunks > b.max_chunks:
            raise RecordCostError(
                f"it makes more than {b.max_chunks} chunks (64 + one per 64 of the record's "
                f"{self._size()} bytes)"
            )
        self.output += content_bytes + name_bytes + b.per_chunk
        if self.output > b.max_output_bytes:
            raise RecordCostError(
                f"its chunks come to more than {b.max_output_bytes} bytes of store "
                f"(256 KiB + 32x the record's {self._size()} bytes; {self.chunks} chunks so "
                "far, each repeating the record's facets and an embedding)"
            )

    def _size(self) -> int:
        return (self.budget.max_name_bytes - NAME_FLOOR) // NAME_RATIO
