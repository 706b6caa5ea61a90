"""Command-line interface: argument parsing and output only; the work lives in the library.

Each command handler imports its implementation when it runs: importing every command's
code up front (GitPython, numpy, httpx, the MCP SDK, tree-sitter) took ~4.7 s against
~0.14 s for the parser alone (measured under load on the 2-core machine), and a cold
`cce knowledge search` must stay lean.
"""
