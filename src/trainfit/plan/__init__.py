"""Planning a training job over devices: which setting fits each, with what micro-batch.

- `search`: `plan()` over the devices asked for, and its argument checks.
- `device`: one GPU's (or Apple GPU's) plan; `cpu`: the CPU as a device.
- `ladder`: the one low-memory ladder (`LADDER`), the settings a device is tried with and the
  ladder table; `tiers`: batch splits and the tiers.
- `traces`: the traces and scalings a plan shares between devices and settings.
- `times`: step times, a measured step, run hours and costs.
- `beyond`: what holds a job one GPU cannot (from `trainfit.distributed`).
- `worker`: the ladder traced in a worker process.
- `options`: the typed results (verdicts, settings, notes' facts, `Plan`); `words`: the one
  place they become sentences and JSON.
- `stages`: a staged schedule planned stage by stage.
"""
