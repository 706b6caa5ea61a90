"""`cce sync verify --checksum-only` on roots that have nothing to verify (docs/spec/sync.md §6.4)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.helpers.sync import CURATED, index
from tests.helpers.sync_env import cli


def test_a_root_without_any_marker_has_nothing_to_verify(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    expected = (
        "error: nothing to verify for this store: no `.cce/knowledge/synced.json` marker "
        "(not a pulled store)\n"
    )
    rc, out, err = cli(capsys, "sync", "verify", "--checksum-only", "--dir", str(tmp_path))
    assert (rc, out, err) == (1, "", expected)
    # A locally indexed store has no marker either: it was not pulled.
    index(tmp_path, CURATED.read_bytes())
    rc, out, err = cli(capsys, "sync", "verify", "--checksum-only", "--dir", str(tmp_path))
    assert (rc, out, err) == (1, "", expected)
