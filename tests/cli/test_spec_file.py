"""`trainfit plan spec.yaml`: the models' files and the report are written whole or not at
all."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from trainfit.cli.main import main


def test_a_spec_with_a_good_and_a_bad_model_writes_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    spec = textwrap.dedent(
        """
        models:
          - {name: good, model: "trainfit.models.zoo:emotion_mlp"}
          - {name: bad, model: "trainfit.models.zoo:no_such_model"}
        training: {effective_batch: 16}
        devices: [h100]
        jobs: 1
        outputs: {config_dir: cfg, report: rep}
        """
    )
    (tmp_path / "spec.yaml").write_text(spec)
    monkeypatch.chdir(tmp_path)
    assert main(["plan", "spec.yaml"]) == 1
    err = capsys.readouterr().err
    assert "no_such_model" in err and "wrote" not in err
    assert [p.name for p in tmp_path.iterdir()] == ["spec.yaml"]
