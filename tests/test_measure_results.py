"""The committed `trainfit measure` table is what benchmarks/measure/compare.py makes of the
committed raw GPU results."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

RESULTS = Path(__file__).parents[1] / "benchmarks" / "measure" / "results"


def test_the_measure_table_is_regenerated_from_the_raw_results():
    done = subprocess.run(
        [sys.executable, "-m", "benchmarks.measure.compare", str(RESULTS / "raw")],
        capture_output=True,
        text=True,
        cwd=RESULTS.parents[2],
        check=True,
    )
    assert done.stdout.rstrip() == (RESULTS / "measure_h100.md").read_text().rstrip()
    assert "Device memory needed: median |error| 0.3%, max 3.6% over 12 cases" in done.stdout
