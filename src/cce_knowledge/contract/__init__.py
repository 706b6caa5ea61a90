"""The contracts: `cce.knowledge/v1` records, `cce.feed-manifest/v1`, `cce.knowledge.ask/v1`."""
