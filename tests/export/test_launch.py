"""`trainfit.export.launch`: the launch files of a plan's device."""

from __future__ import annotations

import json

from tests.export.support import _of
from trainfit.export.formats import ExportFormat
from trainfit.export.launch import launch_files
from trainfit.plan.options import Plan


def test_a_device_that_fits_alone_exports_one_gpus_launch_files(small: Plan) -> None:
    files = dict(launch_files(small, _of(small, "h100"), ExportFormat.TORCHRUN))
    settings = json.loads(files["fsdp2_h100.json"])
    assert settings["predicted_per_rank_bytes"] == _of(small, "h100").setting.needed_bytes
    assert settings["predicted_label"] == "modelled"
