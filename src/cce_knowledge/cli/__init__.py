"""Command-line interface: argument parsing and output only; the work lives in the library."""
