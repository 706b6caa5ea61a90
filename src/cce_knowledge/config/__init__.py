"""Project configuration: `<root>/.cce/config`."""
