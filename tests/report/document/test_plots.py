"""`trainfit.report.document.plots`: the report's PNG plots."""

from __future__ import annotations

from trainfit.report.document import write_plots


def test_plots_are_pngs_without_a_software_tag(report, tmp_path) -> None:
    paths = write_plots(report, tmp_path)
    assert sorted(p.name for p in paths) == ["wide_curve.png", "wide_memory.png", "wide_time.png"]
    for path in paths:
        data = path.read_bytes()
        assert data[:8] == b"\x89PNG\r\n\x1a\n" and data[12:16] == b"IHDR"
        assert b"matplotlib" not in data
        import matplotlib.image

        assert matplotlib.image.imread(path).shape[2] == 4
