"""`cce corpus serve`: a corpus over HTTP — the reference's `GET /docs` bridge and the
MCP tools over Streamable HTTP at `/mcp`, behind one bearer token."""
