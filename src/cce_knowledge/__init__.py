"""cce-knowledge: knowledge corpora for developers and AI coding agents.

Interoperable with the reference `cce` engine (Davidslv/cce-rust): stores and `.cck`
artifacts written here are byte-identical to the ones it writes for the same feed.
"""

__version__ = "2.0.0"

#: The pinned contract id of a knowledge record / store.
KNOWLEDGE_SCHEMA = "cce.knowledge/v1"
