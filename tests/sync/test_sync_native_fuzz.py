"""The native accelerator under AddressSanitizer + UBSan: damaged input never makes it
read or write out of bounds (tools/fuzz_cckfast.py, a few seconds per run)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.helpers.sanitized import fuzz_sanitized


@pytest.mark.slow
def test_native_accelerator_is_memory_safe_on_damaged_input(tmp_path: Path) -> None:
    assert "damaged inputs" in fuzz_sanitized(tmp_path, "SOURCE", "fuzz_cckfast.py")
