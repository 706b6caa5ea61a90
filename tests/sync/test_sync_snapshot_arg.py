"""A `--snapshot` value becomes a path segment on the cache (docs/spec/sync.md §5.2 step 3)."""

from __future__ import annotations

import pytest

from cce_knowledge.core.errors import SyncError
from cce_knowledge.core.untrusted import shown
from cce_knowledge.sync.keys import check_snapshot_arg


@pytest.mark.parametrize(
    "snap", ["598e1b3891572bbb", "", "anything-the-reference-publishes", "..."]
)
def test_single_segments_pass(snap: str) -> None:
    assert check_snapshot_arg(snap) == snap


@pytest.mark.parametrize("snap", ["a/b", "..", ".", "a\\b", "a\x00b", "../../x"])
def test_anything_that_could_leave_the_corpus_directory_is_refused(snap: str) -> None:
    with pytest.raises(SyncError) as e:
        check_snapshot_arg(snap)
    # Control characters (the NUL) are printed escaped.
    assert (
        e.value.message == f"invalid snapshot id `{shown(snap)}`: it must be a single path segment"
    )
