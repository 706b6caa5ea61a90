"""The MCP server (`cce mcp`): knowledge retrieval served to agents over stdio.

`render` holds the byte-pinned text of every tool answer (pure functions),
`tools` the tool contract and handlers over a root, `server` the SDK wiring.
Only `server` imports the `mcp` SDK, so the rest is cheap to import and test.
"""
