"""Where things are, and the git identity tests commit with (never the machine's)."""

from pathlib import Path

TESTS = Path(__file__).resolve().parents[1]
REPO = TESTS.parent

# For commits a test makes itself (seeding a cache, fixture repositories): a fresh
# machine has no global identity, and the product never needs one.
TEST_IDENTITY = {
    "GIT_AUTHOR_NAME": "cce-test",
    "GIT_AUTHOR_EMAIL": "cce-test@localhost",
    "GIT_COMMITTER_NAME": "cce-test",
    "GIT_COMMITTER_EMAIL": "cce-test@localhost",
}
