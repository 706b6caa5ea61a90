"""The Action's interface: input and output names of the root action.yml and of each
composable sub-action (setup/ aside, which is shell only), shared by the CLI parser,
the driver and the tests that hold the action.yml files to it. Stdlib-free."""

#: The all-in-one root action.yml (`cce action run`).
INPUTS = (
    "feed",
    "manifest",
    "chunk-policy",
    "extract",
    "corpus",
    "remote",
    "cache-token",
    "source-token",
    "retention",
    "dry-run",
    "force",
    "ask-suite",
    "allow-empty",
    "incremental",
    "semantic-url",
    "semantic-model",
    "signing-key",
    "allowed-signers",
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

#: step (`cce action <step>`, the sub-action directory of the same name) → inputs.
STEP_INPUTS: dict[str, tuple[str, ...]] = {
    "run": INPUTS,
    "validate": ("files", "working-directory"),
    "index": (
        "feed",
        "manifest",
        "chunk-policy",
        "extract",
        "source-token",
        "allow-empty",
        "semantic-url",
        "semantic-model",
        "incremental",
        "corpus",
        "remote",
        "cache-token",
        "working-directory",
    ),
    "guard": (
        "corpus",
        "remote",
        "cache-token",
        "force",
        "fail-on-shrink",
        "working-directory",
    ),
    "push": (
        "corpus",
        "remote",
        "cache-token",
        "retention",
        "force",
        "skip-unchanged",
        "ask-suite",
        "signing-key",
        "working-directory",
    ),
    "pull": (
        "corpus",
        "remote",
        "cache-token",
        "snapshot",
        "semantic-url",
        "semantic-model",
        "allowed-signers",
        "working-directory",
    ),
}

#: step → outputs it writes to $GITHUB_OUTPUT.
STEP_OUTPUTS: dict[str, tuple[str, ...]] = {
    "run": OUTPUTS,
    "validate": ("files", "problems"),
    "index": ("snapshot", "records", "chunks", "feed"),
    "guard": ("status", "remote-snapshot", "added", "removed", "changed", "diff-markdown"),
    "push": ("published", "status", "snapshot", "artifact-key"),
    "pull": ("snapshot", "records", "chunks"),
}
