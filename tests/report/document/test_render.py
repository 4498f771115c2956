"""`trainfit.report.document.render`: the report as Markdown, JSON and self-contained HTML."""

from __future__ import annotations

import dataclasses
import json
import re

from tests.report.document.wide import GIB, MODEL, _device, _headings
from trainfit.distributed.comm import Collectives, CommTime
from trainfit.distributed.memory import RankMemory
from trainfit.distributed.search import DistributedPlan
from trainfit.distributed.strategy import Offload, Strategy
from trainfit.hardware.catalog import get_device
from trainfit.plan.cost_words import cost_line_dict
from trainfit.plan.options import Sharded
from trainfit.report.document import InferenceRow, to_html, to_json, to_markdown, write_report
from trainfit.spec import LoraSpec, OptimizerKind, Precision


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
