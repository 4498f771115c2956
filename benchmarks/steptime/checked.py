"""How the shipped step-time rules did on the H100 where they were checked blind: the pooled
errors of the blind sets whose committed predictions these rules made, written to
`src/trainfit/timing/blind_check.json` for every H100 step time to say (`BlindChecked`).

    PYTHONPATH=src:. python -m benchmarks.steptime.checked           # writes the file
    PYTHONPATH=src:. python -m benchmarks.steptime.checked --check   # the file is up to date
    PYTHONPATH=src:. python -m benchmarks.steptime.checked --rules   # and the rules today
                                                                     # still predict those

Each step's truth is the median of its loop-timed runs (`compare_window.loop_runs`), its
prediction the one committed before the runs (`results/<set>_predictions.json`), never a
recomputed one. `SETS` names the sets the rules of this tree predicted: when the rules change,
the list starts again with the first set predicted by the new ones (until then the file names
no set and no H100 step time claims a check). `--rules` recomputes each step's prediction and
fails where one moved by more than `SAME` from the committed one.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from pathlib import Path
from typing import Any

from benchmarks.steptime.compare_window import loop_runs
from benchmarks.steptime.predict import PREDICTION_FILES, RESULTS

SETS = ("blind12", "blind13", "blind14")
"""The blind sets whose committed predictions the step-time rules of this tree made (the rules
unchanged since 2026-11-27 16:09 UTC, before the twelfth set was predicted)."""
DEVICE = "h100"
"""The catalog row of the GPU the sets were timed on (NVIDIA H100 80GB HBM3)."""
SAME = 0.005
"""How far (relative) a recomputed prediction may move from the committed one and still be
the same rules' (`--rules`)."""
OUT = Path(__file__).parents[2] / "src" / "trainfit" / "timing" / "blind_check.json"


def _record(blind_set: str) -> dict[str, Any]:
    """The timed runs of `blind_set` (`results/<set>_raw/machine1.json`)."""
    return json.loads((RESULTS / f"{blind_set}_raw" / "machine1.json").read_text())


def errors(blind_set: str) -> dict[str, float]:
    """Each step of `blind_set`: committed prediction over the median of its runs, minus 1."""
    committed = json.loads(PREDICTION_FILES[blind_set].read_text())["cases"]
    timed = loop_runs(_record(blind_set))
    if set(timed) != set(committed):  # NB: a step that failed when timed is not dropped unsaid
        raise SystemExit(
            f"{blind_set}: predicted and timed steps differ: {set(committed) ^ set(timed)}"
        )
    return {
        name: committed[name]["step_seconds"] / statistics.median(runs) - 1
        for name, runs in timed.items()
    }


def sizes(steps: dict[str, list[str]]) -> list[tuple[int, int]]:
    """Each step (blind set -> its step names): its model's parameters and how many of them
    it trains (counted by trainfit, a DPO reference included in the first)."""
    from benchmarks.steptime.cases import case_set
    from benchmarks.steptime.predict import spec_kwargs
    from trainfit.memory.states import parameter_counts
    from trainfit.spec import TrainSpec

    out = []
    for s, names in steps.items():
        cases = case_set(s)
        out += [parameter_counts(TrainSpec(**spec_kwargs(name, cases))) for name in names]
    return out


def check_record() -> dict[str, Any]:
    """The pooled check of `SETS`, as `blind_check.json` holds it."""
    by_set = {s: errors(s) for s in SETS}
    signed = [e for found in by_set.values() for e in found.values()]
    counted = sizes({s: list(found) for s, found in by_set.items()})
    pooled = [abs(e) for e in signed]
    dates = {_record(s)["environment"]["date"][:10] for s in SETS}
    return {
        "made_by": "benchmarks/steptime/checked.py",
        "device": DEVICE,
        "sets": list(SETS),
        "steps": len(pooled),
        "median_error": round(statistics.median(pooled), 4) if pooled else None,
        "worst_error": round(max(signed, key=abs), 4) if pooled else None,
        "within_20_percent": sum(e <= 0.2 for e in pooled),
        "under": sum(e < 0 for e in signed),
        "largest_parameters": max((total for total, _ in counted), default=0),
        "largest_trained": max((trained for _, trained in counted), default=0),
        "measured": sorted(dates),
    }


def _text(record: dict[str, Any]) -> str:
    return json.dumps(record, indent=1) + "\n"


def moved() -> list[str]:
    """The steps of `SETS` whose prediction today moved more than `SAME` from the committed
    one (each as a line)."""
    from benchmarks.steptime.cases import case_set
    from benchmarks.steptime.predict import predict

    lines = []
    for s in SETS:
        cases = case_set(s)
        committed = json.loads(PREDICTION_FILES[s].read_text())["cases"]
        for name in errors(s):
            now = predict(name, cases)["step_seconds"]
            then = committed[name]["step_seconds"]
            if abs(now / then - 1) > SAME:
                lines.append(f"{s} {name}: committed {then * 1e3:.2f} ms, now {now * 1e3:.2f} ms")
    return lines


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="fail if the file is stale")
    parser.add_argument("--rules", action="store_true", help="also recompute the predictions")
    args = parser.parse_args()
    text = _text(check_record())
    if args.check or args.rules:
        if OUT.read_text() != text:
            sys.exit(f"{OUT} is stale: run python -m benchmarks.steptime.checked")
        if args.rules and (lines := moved()):
            sys.exit("the rules moved since these sets were predicted:\n" + "\n".join(lines))
        print(f"{OUT.name} up to date")
        return
    OUT.write_text(text)
    print(text, end="")


if __name__ == "__main__":
    main()
