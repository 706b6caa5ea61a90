"""The Action's interface: input and output names as in action.yml (stdlib-free,
shared by the CLI parser and the driver)."""

INPUTS = (
    "feed",
    "manifest",
    "extract",
    "corpus",
    "remote",
    "cache-token",
    "source-token",
    "retention",
    "dry-run",
    "force",
    "ask-suite",
    "working-directory",
)

OUTPUTS = (
    "snapshot",
    "records",
    "chunks",
    "added",
    "removed",
    "changed",
    "published",
    "artifact-key",
)
