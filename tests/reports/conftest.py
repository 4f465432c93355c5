"""Fixtures for the reports tests: synthetic run folders with real artifact files (see synthetic_run)."""

from __future__ import annotations

from pathlib import Path

import pytest
import synthetic_run


@pytest.fixture
def small_run(tmp_path: Path) -> Path:
    """A finished 120-case run (three times through every outcome) with artifacts."""
    return synthetic_run.write_run(tmp_path / "run", 120)
