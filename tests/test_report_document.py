"""`trainfit.report.document`: a plan's report as Markdown, JSON, PNG plots and HTML."""

from __future__ import annotations

import dataclasses
import json
import re
import shlex
from pathlib import Path

import pytest
from torch import nn

from trainfit import TrainSpec
from trainfit.cli.main import _parser, main
from trainfit.distributed.comm import Collectives, CommTime
from trainfit.distributed.memory import RankMemory
from trainfit.distributed.search import DistributedPlan
from trainfit.distributed.strategy import Offload, Strategy
from trainfit.errors import SpecError
from trainfit.hardware.catalog import DeviceKind, get_device
from trainfit.plan.cost_words import cost_line_dict
from trainfit.plan.options import Plan, Sharded, Verdict
from trainfit.plan.search import plan
from trainfit.plan.words import note_text
from trainfit.report.document import (
    InferenceRow,
    Report,
    build_report,
    render_plots,
    to_html,
    to_json,
    to_markdown,
    write_plots,
    write_report,
)
from trainfit.report.document.model import Missing, NoFigure
from trainfit.report.document.summary import verdict_text
from trainfit.spec import LoraSpec, OptimizerKind, Precision
from trainfit.timing.missing import NoRate, NoStepTime, NoTime, rate_lack_text
from trainfit.timing.run import RunSpec

GIB = 2**30
MODEL = "tests.test_report_document:wide_mlp"
INPUT = "input=B,64,2048:float32"
TINY = {
    "devices": {
        "tiny-gpu": {
            "display": "Tiny test GPU 1 GB",
            "kind": "cuda",
            "architecture": "ada",
            "runtime_profile": "modelled-from-hopper",
            "memory_gb": 1,
            "compute_capability": [8, 9],
        }
    }
}
"""A 1 GiB GPU the model's weights, gradients and AdamW state alone (0.5 GiB) plus the CUDA
context do not fit."""


def wide_mlp() -> nn.Module:
    """34M parameters: fits an 8 GB GPU, not a 1 GB one; 64 rows a sample, so the largest
    micro-batch is a few hundred on the 8 GB GPU."""
    return nn.Sequential(nn.Linear(2048, 8192), nn.ReLU(), nn.Linear(8192, 2048))


@pytest.fixture(scope="module")
def catalog_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("catalog") / "tiny.json"
    path.write_text(json.dumps(TINY))
    return path


@pytest.fixture(autouse=True)
def tiny_catalog(catalog_file: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TRAINFIT_CATALOG", str(catalog_file))


@pytest.fixture(scope="module")
def planned(catalog_file: Path) -> Plan:
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("TRAINFIT_CATALOG", str(catalog_file))
        return plan(
            TrainSpec(model=MODEL, inputs=(INPUT,)),
            32,
            ("rtx-4060", "h100", "tiny-gpu"),
            run=RunSpec(samples=20_000, epochs=2, kwh_price=0.30),
        )


CLAIMS = (
    {
        "what": "peak memory on the RTX 4060",
        "device": "rtx-4060",
        "quantity": "memory_gib",
        "value": 99.0,
        "source": "seed §RTX 4060",
        "why": "the document counts the whole card",
        "reason": "whole_system",
    },
    {"what": "model size", "quantity": "params_millions", "value": [30, 40], "source": "seed"},
)


@pytest.fixture(scope="module")
def report(planned: Plan, catalog_file: Path) -> Report:
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("TRAINFIT_CATALOG", str(catalog_file))
        return build_report(
            [planned],
            title="Wide MLP <on> three GPUs",
            description="What fits where & why.",
            claims=CLAIMS,
            names=["wide"],
        )


def _device(p: Plan, name: str):
    return next(d for d in p.devices if d.device == name)


def test_the_plan_fits_one_device_and_not_another(planned: Plan) -> None:
    assert _device(planned, "rtx-4060").setting is not None
    assert _device(planned, "tiny-gpu").verdict is Verdict.NO
    assert set(planned.scalings) == {"rtx-4060", "h100"}  # kept for the report, no new trace


def test_breakdown_sums_to_the_plans_memory_and_the_curve_meets_it(report, planned) -> None:
    stage = report.models[0].stages[0]
    memory = {m.device: m for m in stage.memory}
    for name in ("rtx-4060", "h100"):
        d, m = _device(planned, name), memory[name]
        assert m.micro_batch == d.setting.micro_batch
        assert sum(v for _, v in m.breakdown) == d.setting.needed_bytes
        points = {p.micro_batch: p for p in m.curve}
        assert points[m.micro_batch].needed_bytes == d.setting.needed_bytes
        # NB: not monotonic point by point (the allocator's segments), but growing
        assert m.curve[0].needed_bytes < d.setting.needed_bytes < m.curve[-1].needed_bytes
        largest = d.max_micro_batch
        assert 32 < largest < 1 << 16  # found by the plan's search, not its limit
        assert points[largest].fits and not points[largest + 1].fits
    tiny = memory["tiny-gpu"]
    assert not tiny.breakdown and not tiny.curve and tiny.limit_bytes == GIB
    assert tiny.note == note_text(_device(planned, "tiny-gpu"))


def _headings(md: str) -> list[str]:
    """The Markdown's headings (not the comments of its code blocks)."""
    found, code = [], False
    for line in md.splitlines():
        code ^= line.startswith("```")
        if line.startswith("#") and not code:
            found.append(line)
    return found


def test_markdown_sections_and_rows(report, planned) -> None:
    md = to_markdown(report)
    headings = _headings(md)
    assert headings[:11] == [
        "# Wide MLP <on> three GPUs",
        "## Summary",
        "## Quick comparison",
        "## Memory breakdown",
        "## Recommended settings",
        "## Training time",
        "## Cost",
        "## Low-memory options",
        "## If you run out of memory",
        "## Multi-GPU and offload",
        "## Verify on the machine",
    ]
    d = _device(planned, "rtx-4060")
    s = d.setting
    local = next(c for c in d.costs if c.kind == "local")
    usable = get_device("rtx-4060").memory_bytes / GIB  # what PyTorch sees of the 8 GB
    assert (
        f"| rtx-4060 | {d.verdict.value} | {s.needed_bytes / GIB:.2f} GiB | {usable:.2f} GiB | "
        f"bf16, {s.micro_batch} x {s.grad_accum}, adamw | {d.run.step_seconds * 1000:,.1f} ms | "
        f"{d.run.hours:.3g} | {cost_line_dict(local)['total']:.2f} USD |" in md  # cents, as in JSON
    )
    assert "| tiny-gpu | does not fit | - | 1.00 GiB | - | - | - | - |" in md
    assert f"| parameters | {planned.parameters * 2 / GIB:.2f} GiB |" not in md  # fp32 weights
    assert f"| parameters | {planned.parameters * 4 / GIB:.2f} GiB |" in md
    assert "[config_rtx-4060.yaml (rtx-4060)](configs/wide/config_rtx-4060.yaml)" in md
    assert "![memory breakdown per device](plots/wide_memory.png)" in md
    assert "What fits where & why." in md


def test_verify_commands_are_the_settings_flags_and_parse(report, planned) -> None:
    s = _device(planned, "rtx-4060").setting
    (verify,) = [v for v in report.models[0].stages[0].verify if v.device == "rtx-4060"]
    commands = dict(verify.commands)
    largest = commands["the real largest micro-batch, keeping the effective batch"]
    assert largest == (
        f"trainfit measure {MODEL} --input {INPUT} --precision bf16 --optimizer adamw "
        "--max-batch --effective-batch 32 --on cuda --device rtx-4060"
    )
    for command in commands.values():
        assert command in to_markdown(report)
        args = _parser().parse_args(shlex.split(command)[1:])
        assert args.precision == "bf16" and args.input == [INPUT]
    steps = _parser().parse_args(
        shlex.split(commands["real steps beside the estimate (memory and time)"])[1:]
    )
    assert (steps.batch, steps.grad_accum) == (s.micro_batch, s.grad_accum)


def test_claims_are_compared_and_disagreements_flagged(report, planned) -> None:
    memory, size = report.claims
    needed = _device(planned, "rtx-4060").setting.needed_bytes / GIB
    assert memory.trainfit == pytest.approx(needed) and memory.ratio == pytest.approx(needed / 99)
    assert memory.agrees is False
    assert size.trainfit == pytest.approx(planned.parameters / 1e6) and size.ratio == 1.0
    assert size.agrees is True
    md = to_markdown(report)
    assert (
        f"| peak memory on the RTX 4060 | wide | rtx-4060 | memory_gib | the plan's | 99 | "
        f"{needed:,.4g} | {needed / 99:.2f} | DISAGREES: the document counts the whole "
        "machine, trainfit the GPU | seed §RTX 4060 | the document counts the whole card |" in md
    )
    assert "| model size | wide | - | params_millions | the plan's | 30-40 |" in md


def test_a_claim_on_a_device_without_a_setting_has_no_trainfit_figure(planned) -> None:
    claim = {"what": "tiny", "device": "tiny-gpu", "quantity": "memory_gib", "value": 0.8}
    (check,) = build_report([planned], claims=[claim], names=["wide"]).claims
    assert (check.trainfit, check.ratio, check.agrees) == (None, None, None)
    assert check.missing is not None and check.missing.why is NoFigure.DOES_NOT_FIT
    assert check.missing.device == "tiny-gpu"
    assert verdict_text(check).startswith("not computed: does not fit one tiny-gpu")


def test_a_claim_that_cannot_be_found_is_an_error_naming_it(planned) -> None:
    bad = [
        {"what": "on a TPU", "device": "tpu-v5", "quantity": "hours", "value": 1},
        {"what": "speed", "device": "h100", "quantity": "furlongs", "value": 1},
        {"what": "other model", "model": "llama", "quantity": "params_millions", "value": 1},
        {"what": "which device", "quantity": "memory_gib", "value": 1},
    ]
    with pytest.raises(SpecError) as info:
        build_report([planned], claims=bad, names=["wide"])
    text = str(info.value)
    assert "claim 'on a TPU': device 'tpu-v5' is not in the plan of wide" in text
    assert (
        "claim 'speed': quantity 'furlongs' is not one of checkpointing_saves_percent, "
        "component_gib, cost_usd, decode_tokens_per_second, electricity_usd, fits, gpus" in text
    )
    assert "claim 'other model': model 'llama' is not in the plan: one of wide" in text
    assert "claim 'which device': name its device: one of h100, rtx-4060, tiny-gpu" in text


def test_json_round_trips(report) -> None:
    data = json.loads(to_json(report))
    assert sorted(data) == ["claims", "description", "extra", "models", "run", "title"]
    stage = data["models"][0]["stages"][0]
    assert sorted(stage) == ["configs", "epochs", "freeze", "memory", "name", "plan", "verify"]
    assert [d["device"] for d in stage["plan"]["devices"]] == ["rtx-4060", "h100", "tiny-gpu"]
    assert stage["memory"][0]["curve"][0] == {
        "micro_batch": 1,
        "needed_bytes": report.models[0].stages[0].memory[0].curve[0].needed_bytes,
        "fits": True,
    }
    assert data["run"]["samples"] == 20_000 and data["run"]["kwh_price"] == 0.3
    assert to_json(report) == json.dumps(data, indent=2, sort_keys=True) + "\n"


def test_plots_are_pngs_without_a_software_tag(report, tmp_path) -> None:
    paths = write_plots(report, tmp_path)
    assert sorted(p.name for p in paths) == ["wide_curve.png", "wide_memory.png", "wide_time.png"]
    for path in paths:
        data = path.read_bytes()
        assert data[:8] == b"\x89PNG\r\n\x1a\n" and data[12:16] == b"IHDR"
        assert b"matplotlib" not in data
        import matplotlib.image

        assert matplotlib.image.imread(path).shape[2] == 4


def test_html_is_self_contained_and_escaped(report, tmp_path) -> None:
    written = write_report(report, tmp_path)
    page = (tmp_path / "report.html").read_text()
    assert "<title>Wide MLP &lt;on&gt; three GPUs</title>" in page
    assert "What fits where &amp; why." in page
    sources = re.findall(r'src="([^"]*)"', page)
    assert len(sources) == 3 and all(s.startswith("data:image/png;base64,") for s in sources)
    links = re.findall(r'href="([^"]*)"', page)
    assert links and all((tmp_path / link).is_file() for link in links)
    assert not re.search(r"https?://|<link|<script", page)
    md = (tmp_path / "report.md").read_text()
    for line in _headings(md):
        if line.startswith("## "):
            title = line[3:].replace("'", "&#x27;")
            assert f"<h2>{title}</h2>" in page
    assert '<td class="bad">DISAGREES: the document counts the whole machine' in page
    assert page.count("<details>") == page.count("</details>") >= 3
    assert "<details><summary>Details: wide</summary>" in page
    assert tmp_path / "report.html" == written[-1]
    assert (
        (tmp_path / "configs/wide/config_rtx-4060.yaml")
        .read_text()
        .startswith(f"# trainfit plan for {MODEL} on NVIDIA GeForce RTX 4060 8GB\n")
    )


@pytest.mark.slow
def test_the_same_inputs_give_the_same_bytes(report, planned, tmp_path) -> None:
    again = build_report(
        [planned],
        title=report.title,
        description=report.description,
        claims=CLAIMS,
        names=["wide"],
    )
    write_report(report, tmp_path / "a")
    write_report(again, tmp_path / "b")
    files = sorted(
        p.relative_to(tmp_path / "a") for p in (tmp_path / "a").rglob("*") if p.is_file()
    )
    assert len(files) == 8  # report.md, .json, .html, 3 plots, the 2 configs of the GPUs that fit
    for f in files:
        assert (tmp_path / "a" / f).read_bytes() == (tmp_path / "b" / f).read_bytes(), f
    assert render_plots(report) == render_plots(again)
    assert str(tmp_path) not in (tmp_path / "a" / "report.json").read_text()


def test_new_fields_inference_and_extra_sections_render(report) -> None:
    stage = report.models[0].stages[0]
    devices = list(stage.plan.devices)
    devices[2] = dataclasses.replace(
        devices[2],
        distributed=None,  # NB: the older sharded verdict's row
        sharded=Sharded(
            gpus=4,
            per_gpu_bytes=GIB // 2,
            precision=Precision.BF16,
            checkpointing=False,
            optimizer=OptimizerKind.ADAMW,
            micro_batch=1,
            instance="",
            instances=0,
            usd_per_hour=None,
        ),
    )
    spec = dataclasses.replace(stage.plan.spec, lora=LoraSpec(rank=16))
    changed = dataclasses.replace(
        stage, plan=dataclasses.replace(stage.plan, spec=spec, devices=tuple(devices))
    )
    rows = (
        InferenceRow(
            device="h100",
            precision="bf16",
            batch=8,
            context=2048,
            memory_gib=3.25,
            fits=True,
            new_tokens=128,
            prefill_ms=12.5,
            per_token_ms=8.42,
            decode_tokens_per_second=950.0,
            total_ms=1081.84,
            bound="bandwidth",
            labels=(("decode", "modelled"),),
        ),
    )
    model = dataclasses.replace(report.models[0], stages=(changed,), inference=rows)
    extended = dataclasses.replace(report, models=(model,), extra={"notes": {"a": 1}})
    md = to_markdown(extended)
    assert (
        '| (plan) | lora | {"alpha": 32.0, "dropout": 0.0, "qlora": false, "rank": 16, '
        '"targets": []} |' in md
    )
    assert (
        "| h100 | generate | bf16 | 8 | 2048 | 128 | 3.25 GiB | yes | 12.5 | 8.42 | 950 | "
        "1,082 | bandwidth |  |" in md
    )
    assert "| decode | modelled |" in md
    assert "## notes" in md
    assert "| tiny-gpu | 4 GPUs sharded | - | 0.50 GiB | - | - | - x 0 | - | - | - |" in md
    assert "<h2>Inference</h2>" in to_html(extended)


def test_names_must_match_the_plans(planned) -> None:
    with pytest.raises(SpecError, match="2 names for 1 plans"):
        build_report([planned], names=["a", "b"])


@pytest.mark.slow
def test_plan_command_writes_the_report(tmp_path, capsys) -> None:
    out = tmp_path / "rep"
    argv = ["plan", MODEL, "--input", INPUT, "--effective-batch", "32", "--device", "rtx-4060"]
    argv += ["--device", "tiny-gpu", "--samples", "1000", "--jobs", "1", "--report", str(out)]
    assert main(argv) == 0
    err = capsys.readouterr().err
    assert f"wrote {out / 'report.html'}" in err
    names = sorted(str(p.relative_to(out)) for p in out.rglob("*") if p.is_file())
    assert names == [
        "configs/wide_mlp/config_rtx-4060.yaml",
        "plots/wide_mlp_curve.png",
        "plots/wide_mlp_memory.png",
        "plots/wide_mlp_time.png",
        "report.html",
        "report.json",
        "report.md",
    ]
    assert "# trainfit plan: wide_mlp" in (out / "report.md").read_text()


@pytest.mark.slow
def test_plan_command_with_stages_writes_each_stage(tmp_path, capsys) -> None:
    out = tmp_path / "rep"
    argv = ["plan", MODEL, "--input", INPUT, "--effective-batch", "32", "--device", "rtx-4060"]
    argv += ["--samples", "1000", "--stage", "1:0.*", "--stage", "2", "--jobs", "1"]
    assert main([*argv, "--report", str(out)]) == 0
    md = (out / "report.md").read_text()
    assert "## Schedule over the stages" in md and md.count("### Quick comparison") == 2
    assert (out / "configs/wide_mlp/stage1/config_rtx-4060.yaml").is_file()
    assert (out / "plots/wide_mlp_stage2_memory.png").is_file()


def test_a_spec_files_title_and_claims_are_used(planned, tmp_path) -> None:
    from trainfit.report.document import plan_report
    from trainfit.specfile import PlanFile, PlanOptions, PlanResult

    plan_file = PlanFile(title="From the file", claims=[CLAIMS[1]])  # type: ignore[list-item]
    result = PlanResult(options=PlanOptions(model=MODEL), name="wide_mlp", plan=planned)
    write_report(plan_report([result], plan_file), tmp_path)
    data = json.loads((tmp_path / "report.json").read_text())
    assert data["title"] == "From the file" and data["claims"][0]["what"] == "model size"


def test_an_unwritable_report_directory_fails_before_planning(tmp_path, capsys) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("")
    argv = ["plan", MODEL, "--input", INPUT, "--effective-batch", "32", "--device", "h100"]
    assert main([*argv, "--report", str(blocker / "rep")]) == 1
    assert "report directory" in capsys.readouterr().err


@pytest.mark.slow
def test_the_docs_example_runs(tmp_path, monkeypatch) -> None:
    text = (Path(__file__).parent.parent / "docs" / "report.md").read_text()
    code = text.split("```python\n", 1)[1].split("```", 1)[0]
    monkeypatch.chdir(tmp_path)
    exec(compile(code, "docs/report.md", "exec"), {})
    assert (tmp_path / "report" / "report.html").is_file()
    assert (tmp_path / "report" / "plots" / "emotion_mlp_memory.png").is_file()


def test_several_models_get_a_section_each_and_claims_name_theirs(planned) -> None:
    claim = {"what": "size of b", "model": "b", "quantity": "params_millions", "value": 33.5}
    report = build_report([planned, planned], names=["a", "b"], claims=[claim])
    md = to_markdown(report)
    assert "## a\n" in md and "## b\n" in md and md.count("### Quick comparison") == 2
    assert report.claims[0].model == "b" and report.claims[0].agrees
    assert "plots/a_memory.png" in md and "plots/b_memory.png" in md
    with pytest.raises(SpecError, match="claim 'size': name its model: one of a, b"):
        build_report(
            [planned, planned], names=["a", "b"], claims=[dict(claim, what="size", model=None)]
        )
    with pytest.raises(SpecError, match="two models share a name"):
        build_report([planned, planned], names=["a", "a"])


def test_a_claim_on_a_device_whose_time_is_not_modelled_says_so(planned) -> None:
    # a GPU with a setting but no step time (a catalog GPU with no compute rate for its
    # precision, e.g. the RTX 5060 Ti's bf16): not "no setting fits"
    lack = NoRate(device="Test GPU", precision="bf16")
    why = f"step time not modelled: {rate_lack_text(lack)}"
    gap = NoStepTime(why=NoTime.NOT_MODELLED, lack=lack)
    devices = tuple(
        dataclasses.replace(d, step_time=None, step_times=(), run=None, costs=(), no_time=gap)
        if d.device == "rtx-4060"
        else d
        for d in planned.devices
    )
    untimed = dataclasses.replace(planned, devices=devices)
    setting = _device(untimed, "rtx-4060").setting
    claims = [
        {"what": "step", "device": "rtx-4060", "quantity": "step_seconds", "value": 0.5},
        {"what": "hours", "device": "rtx-4060", "quantity": "hours", "value": 3},
        {"what": "memory", "device": "rtx-4060", "quantity": "memory_gib", "value": 1},
    ]
    report = build_report([untimed], claims=claims, names=["wide"])
    step, hours, memory = report.claims
    for check in (step, hours):
        assert check.trainfit is None
        assert check.missing == Missing(why=NoFigure.NO_STEP_TIME, device="rtx-4060", detail=why)
        assert verdict_text(check) == f"not computed: {why}"
    assert memory.trainfit == pytest.approx(setting.needed_bytes / GIB)
    md = to_markdown(report)
    assert "does not fit one rtx-4060" not in md and f"rtx-4060: {why}" in md
    assert f"{setting.micro_batch} x {setting.grad_accum}" in md


# --- inference rows and the inference claims ---

ROWS = (
    InferenceRow(device="rtx-4060", precision="bf16", batch=1, context=512, new_tokens=64,
                 memory_gib=2.0, fits=True, kind="generate", prefill_ms=10.0, per_token_ms=20.0,
                 decode_tokens_per_second=50.0, total_ms=1270.0, bound="bandwidth"),
    InferenceRow(device="rtx-4060", precision="bf16", batch=8, context=512, new_tokens=64,
                 memory_gib=3.0, fits=True, kind="generate", prefill_ms=40.0, per_token_ms=25.0,
                 decode_tokens_per_second=320.0, total_ms=1615.0, bound="bandwidth"),
    InferenceRow(device="m4-pro-16gb", precision="bf16", batch=1, context=0, memory_gib=None,
                 fits=None, kind="refused", note="inference is estimated for CUDA GPUs"),
)  # fmt: skip


def _with_rows(planned: Plan, claims: list[dict[str, object]]) -> Report:
    return build_report([planned], names=["wide"], inference=[ROWS], claims=claims)


def test_inference_claims_match_model_device_precision_and_batch(planned) -> None:
    claims = [
        {"what": "speed", "device": "rtx-4060", "quantity": "decode_tokens_per_second",
         "value": [40, 60], "batch": 1},
        {"what": "latency b8", "device": "rtx-4060", "quantity": "latency_ms", "value": 1000,
         "batch": 8, "precision": "bf16"},
        {"what": "memory", "device": "rtx-4060", "quantity": "inference_memory_gib",
         "value": 3.0, "batch": 8},
        {"what": "mac", "device": "m4-pro-16gb", "quantity": "latency_ms", "value": 100},
    ]  # fmt: skip
    speed, latency, memory, mac = _with_rows(planned, claims).claims
    assert (speed.trainfit, speed.ratio, speed.agrees) == (50.0, 1.0, True)
    assert speed.note == "generate, bf16, batch 1"
    assert latency.trainfit == 1615.0 and latency.ratio == pytest.approx(1.615)
    assert latency.agrees is False
    assert memory.trainfit == 3.0 and memory.agrees is True
    assert (mac.trainfit, mac.agrees) == (None, None)
    assert mac.missing == Missing(
        why=NoFigure.NO_INFERENCE,
        device="m4-pro-16gb",
        detail="inference is estimated for CUDA GPUs",
    )


def test_inference_claims_that_cannot_be_matched_name_the_choices(planned) -> None:
    bad = [
        {"what": "which", "device": "rtx-4060", "quantity": "latency_ms", "value": 1},
        {"what": "int4", "device": "rtx-4060", "quantity": "latency_ms", "value": 1,
         "precision": "int4"},
        {"what": "tpu", "device": "h100", "quantity": "latency_ms", "value": 1},
    ]  # fmt: skip
    with pytest.raises(SpecError) as info:
        _with_rows(planned, bad)
    text = str(info.value)
    assert "claim 'which': name its precision and batch: bf16 batch 1, bf16 batch 8" in text
    assert (
        "claim 'int4': no inference row of wide on rtx-4060 at the claim's precision/batch: "
        "one of bf16 batch 1, bf16 batch 8" in text
    )
    assert "claim 'tpu': device 'h100' is not in the inference table of wide" in text
    with pytest.raises(SpecError, match="the plan of wide has no inference table"):
        build_report(
            [planned], names=["wide"], claims=[{"what": "x", "device": "h100",
                                                "quantity": "latency_ms", "value": 1}]
        )  # fmt: skip


def test_rows_from_estimates_and_a_serving_only_report(tmp_path) -> None:
    from trainfit.estimator.forward import OffGpu, ServingRefusal, estimate_forward
    from trainfit.report.document import ServingOnly, inference_rows

    spec = TrainSpec(model="trainfit.models.zoo:emotion_mlp")
    forward = estimate_forward(spec, batch=2, precision="fp32", device="rtx-4060")
    refused = ServingRefusal(model=spec.model, device="cpu", precision="fp32", batch=2,
                             why=(OffGpu(device="cpu", kind=DeviceKind.CPU),))  # fmt: skip
    row, no = inference_rows([forward, refused])
    assert row.kind == "forward" and row.total_ms == pytest.approx(forward.seconds * 1e3, rel=1e-3)
    assert row.prefill_ms == row.total_ms and row.decode_tokens_per_second is None
    assert row.memory_gib == pytest.approx(forward.device_memory_needed_bytes / GIB, abs=1e-4)
    assert dict(row.labels)["latency"].startswith("modelled: forward only")
    assert (no.kind, no.memory_gib) == ("refused", None)
    assert no.note.startswith("a forward is estimated for GPUs; 'cpu' is of kind 'cpu'")
    claim = {"what": "latency", "device": "rtx-4060", "quantity": "latency_ms", "value": 40}
    report = build_report(
        [ServingOnly(model=spec.model, parameters=230_000)], inference=[(row, no)], claims=[claim]
    )
    md = to_markdown(report)
    assert "## Inference" in md or "# Inference" in md
    assert "| cpu | refused | fp32 | 2 |" in md
    assert report.models[0].stages == () and report.run is None
    assert report.claims[0].trainfit == row.total_ms
    write_report(report, tmp_path / "rep")
    assert (tmp_path / "rep" / "report.html").is_file()


@pytest.mark.slow
def test_plan_with_inference_and_an_effective_batch_reports_both(tmp_path, capsys) -> None:
    out = tmp_path / "rep"
    argv = ["plan", "trainfit.models.zoo:emotion_mlp", "--effective-batch", "32", "--device",
            "rtx-4060", "--samples", "1000", "--jobs", "1", "--inference",
            "--inference-precision", "fp32", "--infer-batch", "1",
            "--report", str(out)]  # fmt: skip
    assert main(argv) == 0
    md = (out / "report.md").read_text()
    assert "## Quick comparison" in md and "## Inference" in md
    assert "| rtx-4060 | forward | fp32 | 1 |" in md
    data = json.loads((out / "report.json").read_text())
    assert data["models"][0]["inference"][0]["kind"] == "forward"


def test_serving_only_plan_writes_an_inference_report(tmp_path, capsys) -> None:
    out = tmp_path / "rep"
    argv = ["plan", "trainfit.models.zoo:emotion_mlp", "--device", "rtx-4060", "--inference",
            "--inference-precision", "fp16", "--report", str(out)]  # fmt: skip
    assert main(argv) == 0
    md = (out / "report.md").read_text()
    assert "| rtx-4060 | forward | fp16 | 1 |" in md and "Quick comparison" not in md


def test_a_distributed_plan_renders_its_engine_and_per_rank_parts(report) -> None:
    stage = report.models[0].stages[0]
    devices = list(stage.plan.devices)
    memory = RankMemory(
        strategy=Strategy.FSDP2, offload=Offload.NONE, gpus=8, nodes=1, micro_batch=2,
        total_bytes=70 * GIB, peak_allocated_bytes=60 * GIB, parameters_bytes=14 * GIB,
        gradients_bytes=7 * GIB,
        optimizer_state_bytes=0, activations_bytes=0, other_bytes=0, engine_bytes=15 * GIB,
        nccl_bytes=0, context_bytes=0, host_bytes_per_node=0,
    )  # fmt: skip
    comm = CommTime(
        seconds=5.47, exposed_seconds=0.0, bytes_per_gpu=0, intra_gbs=450.0, inter_gbs=None,
        collectives=Collectives.GATHERED,
    )  # fmt: skip
    many = DistributedPlan(
        device="tiny-gpu", strategy=Strategy.FSDP2, offload=Offload.NONE, gpus=8, nodes=1,
        precision=Precision.BF16, checkpointing=True, micro_batch=2, grad_accum=8,
        memory=memory, budget_bytes=72 * GIB, comm=comm, step_seconds=10.15,
        instance="lambda-8x-h100-sxm", instances=1, usd_per_hour=24.0,
    )  # fmt: skip
    devices[2] = dataclasses.replace(devices[2], distributed=many)
    changed = dataclasses.replace(
        stage, plan=dataclasses.replace(stage.plan, devices=tuple(devices))
    )
    md = to_markdown(
        dataclasses.replace(
            report, models=(dataclasses.replace(report.models[0], stages=(changed,)),)
        )
    )
    assert (
        "| tiny-gpu | fsdp2 on 8 GPUs (bf16, checkpointing) | 2 x 8 | 70.00 GiB | 10.15 s | "
        "5.47 s (0.00 s not hidden) | lambda-8x-h100-sxm x 1 | 24.00 |" in md
    )
    assert (
        "| tiny-gpu | fsdp2 on 8 GPUs (bf16, checkpointing) | 14.00 GiB | 7.00 GiB | 0.00 GiB | "
        "0.00 GiB | 0.00 GiB | 15.00 GiB | 0.00 GiB | 0.00 GiB |" in md
    )
    assert "distributed" not in md.split("## Multi-GPU and offload")[1].split("##")[0].lower()
