"""Where models come from: the catalog, a Hugging Face config, or a user's import path.

`build_program()` turns a spec into a `StepProgram`: the module, a batch factory and the loss,
built on any device. The estimator builds it on the meta device (no weights); the real-step
runner builds it on the CPU in fp32 and moves it to the device.
"""

from __future__ import annotations

import copy
import dataclasses
import importlib
import json
import logging
import os
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn

from trainfit.errors import (
    USER_CODE_ERRORS,
    ModelLoadError,
    SpecError,
    TrainfitError,
    raised_in_user_code,
)
from trainfit.models import catalog as _catalog
from trainfit.models import weights as _weights
from trainfit.models.heads import (
    MULTIPLE_CHOICES,
    TEXT_TASKS,
    HfTask,
    ModelClass,
    choose_class,
    head_inputs,
    prepare_config,
    sequence_problem,
)
from trainfit.models.imports import is_import_path, resolve
from trainfit.models.live_names import is_live, model_label
from trainfit.models.program import (
    Batch,
    DefaultLoss,
    Description,
    LossFn,
    LossNote,
    OwnLoss,
    StepProgram,
    TaskNote,
    UserLoss,
    UserStep,
)
from trainfit.spec import InputSpec, Precision, TrainSpec

DEFAULT_SEQ_LEN = 1024


def build_program(
    spec: TrainSpec, device: torch.device | str = "meta", layers: int | None = None
) -> StepProgram:
    """Build the model of `spec` on `device` and describe its batch and loss.

    `layers`: build a transformers model with this many decoder layers instead of its own
    (`trainfit.trace.stamp`; the caller checks that its layers are alike)."""
    device = torch.device(device)
    row = _catalog.find(spec.model)
    declared = torch.float32
    if row is not None and row.kind == "module":
        program = _module_program(spec, row.factory, row.inputs, device, f"{row.name} (catalog)")
    elif row is not None:
        config = _hf_config_from_dict(row.config)
        declared = _weights.named_dtype(row.torch_dtype or None, row.name)
        origin = f"{row.name} (catalog)"
        chosen = choose_class(config, spec.task, row.task, origin)
        program = _hf_program(spec, _layered(config, layers), chosen, device, origin, True)
    elif is_import_path(spec.model):
        # NB: a live model is named by its class (its import path resolves in this process only)
        origin = model_label(spec.model) if is_live(spec.model) else f"{spec.model} (import path)"
        program = _module_program(spec, spec.model, (), device, origin)
    elif os.path.isdir(spec.model):
        _check_config_file(spec.model)
        config = _hf_config_from_pretrained(spec.model)
        declared = _weights.config_dtype(config)  # NB: before from_config sets config.dtype
        origin = f"{spec.model} (local config)"
        chosen = choose_class(config, spec.task, None, origin)
        program = _hf_program(spec, _layered(config, layers), chosen, device, origin)
    elif "/" in spec.model and not spec.model.startswith((".", "/")):
        config = _hf_config_from_pretrained(spec.model)
        declared = _weights.config_dtype(config)  # NB: before from_config sets config.dtype
        origin = f"{spec.model} (hub config)"
        program = _hf_program(
            spec, config, choose_class(config, spec.task, None, origin), device, origin
        )
    else:
        _catalog.lookup(spec.model)  # raises UnknownNameError with close matches
        raise AssertionError("unreachable")
    policy = _weights.base_dtype(spec, declared)
    if spec.lora is not None:
        from trainfit.models.lora import wrap_with_lora

        if not spec.lora.qlora:  # NB: QLoRA loads in its compute dtype (models.lora)
            _weights.check_device_dtype(spec, policy)
        if not spec.lora.qlora and policy != torch.float32:
            # NB: the base loads in this dtype (from_pretrained's torch_dtype) and stays frozen;
            # peft makes the adapters in fp32 (autocast_adapter_dtype=True, its default)
            program.model.to(policy)
        model, adapted = wrap_with_lora(program.model, spec.lora, spec.precision, device)
        program = dataclasses.replace(
            program,
            model=model,
            description=dataclasses.replace(program.description, lora=adapted),
        )
    if spec.preference is not None:
        from trainfit.models.preference import preference_program

        reference = _weights.reference_dtype(spec, policy, declared)
        if spec.reference_dtype is not None:
            _weights.check_device_dtype(spec, reference)
        return preference_program(program, spec, reference)
    if spec.step_fn:
        step = resolve(spec.step_fn, "step function")
        return StepProgram(
            model=program.model,
            make_batch=program.make_batch,
            compute_loss=_checked_loss(step, spec.step_fn),
            description=program.description,
            loss_note=UserStep(path=spec.step_fn),
            is_hf=program.is_hf,
            tokens_per_sample=program.tokens_per_sample,
            model_class=program.model_class,
        )
    return program


def model_problems(
    model: str,
    loss: str | None,
    step_fn: str | None,
    inputs: bool = False,
    task: str | None = None,
) -> list[str]:
    """What would stop `build_program` from finding the model, its loss or its step
    function, each a line, without building anything: a name not in the catalog, an import
    path that does not import, a directory without config.json, `loss` or `inputs` on a
    transformers model, `task` on a plain module. A hub id is looked up only when the model
    is built."""
    problems: list[str] = []
    row = _catalog.find(model)
    transformers_model = row is not None and row.kind != "module"
    origin = f"{model} (catalog)"
    if task and (is_import_path(model) if row is None else row.kind == "module"):
        problems.append(_task_on_a_module(task, origin if row else f"{model} (import path)"))
    try:
        if row is None and is_import_path(model):
            resolve(model, "model factory")
        elif row is None and os.path.isdir(model):
            transformers_model, origin = True, f"{model} (local config)"
            if not os.path.isfile(os.path.join(model, "config.json")):
                problems.append(f"model directory {model} holds no config.json")
        elif row is None and "/" in model and not model.startswith((".", "/")):
            transformers_model, origin = True, f"{model} (hub config)"
        elif row is None:
            _catalog.lookup(model)  # NB: raises UnknownNameError with the close matches
    except TrainfitError as exc:
        problems.append(str(exc))
    for what, path in (("loss function", loss), ("step function", step_fn)):
        if path:
            try:
                resolve(path, what)
            except TrainfitError as exc:
                problems.append(str(exc))
    if transformers_model:
        try:
            _check_transformers_options(loss, inputs, origin)
        except SpecError as exc:
            problems += exc.problems
    return problems


def _task_on_a_module(task: str, origin: str) -> str:
    """The line for `--task` given for a plain module, which would otherwise be ignored."""
    return (
        f"--task {task} is for a transformers model: {origin} is a plain module, whose "
        "output is what it returns; drop --task (give --loss or --step-fn for another loss)"
    )


def _checked_loss(fn: LossFn, where: str) -> LossFn:
    def compute(model: nn.Module, batch: Batch) -> torch.Tensor:
        loss = fn(model, batch)
        if not isinstance(loss, torch.Tensor) or loss.numel() != 1:
            shape = tuple(loss.shape) if isinstance(loss, torch.Tensor) else type(loss).__name__
            raise TrainfitError(f"{where} must return a scalar loss tensor, got {shape}")
        return loss

    return compute


# --- Hugging Face ---------------------------------------------------------------------------


def hf_config(spec: TrainSpec) -> Any | None:
    """The transformers config `build_program` builds `spec`'s model from, for a catalog row
    or a local config directory; None for any other model (a module, an import path, a hub
    id)."""
    row = _catalog.find(spec.model)
    if row is not None:
        return None if row.kind == "module" else _hf_config_from_dict(row.config)
    if is_import_path(spec.model) or not os.path.isdir(spec.model):
        return None
    _check_config_file(spec.model)
    return _hf_config_from_pretrained(spec.model)


def _layered(config: Any, layers: int | None) -> Any:
    """`config` with `layers` decoder layers (itself when None); a per-layer list of layer
    kinds keeps its first kind."""
    if layers is not None:
        config.num_hidden_layers = layers
        kinds = getattr(config, "layer_types", None)
        if kinds:
            config.layer_types = [kinds[0]] * layers
    return config


def _transformers() -> Any:
    try:
        import transformers
    except ImportError as exc:
        raise ModelLoadError("this model needs transformers: pip install 'trainfit[hf]'") from exc
    transformers.logging.set_verbosity_error()
    return transformers


def _hf_config_from_dict(values: dict[str, Any]) -> Any:
    transformers = _transformers()
    values = copy.deepcopy(values)  # NB: AutoConfig.for_model mutates nested dicts
    model_type = values.pop("model_type")
    return transformers.AutoConfig.for_model(model_type, **values)


def _check_config_file(directory: str) -> None:
    """A model directory holds config.json, a JSON object (transformers' own errors for these
    speak of a missing model_type, or of list indices)."""
    path = os.path.join(directory, "config.json")
    if not os.path.isfile(path):
        raise ModelLoadError(
            f"model directory {directory} holds no config.json: give the folder a transformers "
            "model was saved to (save_pretrained), a hub id, or a catalog name (trainfit models)"
        )
    try:
        with open(path, encoding="utf-8") as file:
            data = json.load(file)
    except (OSError, UnicodeDecodeError, json.JSONDecodeError):
        return  # NB: transformers words an unreadable file itself
    if not isinstance(data, dict):
        raise ModelLoadError(
            f"{path} must hold a JSON object of the config's fields, got a "
            f"{type(data).__name__}: fix config.json"
        )


def _hf_config_from_pretrained(name: str) -> Any:
    transformers = _transformers()
    hub = logging.getLogger("huggingface_hub")
    level = hub.level
    # NB: without a network the hub logs each failed request and retry (five lines on stderr
    # before the error says the same in one): its warnings are off for the lookup
    hub.setLevel(logging.ERROR)
    try:
        return transformers.AutoConfig.from_pretrained(name)
    except (OSError, ValueError) as exc:
        raise ModelLoadError(
            f"cannot load a transformers config from {name!r}: {_words(exc)}; give a directory "
            "holding config.json, a reachable hub id, or a catalog name (trainfit models)"
        ) from exc
    except Exception as exc:  # NB: a field of the wrong type (huggingface_hub's strict check)
        raise ModelLoadError(
            f"the transformers config of {name!r} is invalid: {_words(exc)}; fix config.json"
        ) from exc
    finally:
        hub.setLevel(level)


def _words(exc: BaseException) -> str:
    """An exception of a library as one line: its type and message, lines joined."""
    lines = [line.strip() for line in str(exc).splitlines() if line.strip()]
    text = " ".join(lines)
    if len(text) > 300:
        text = text[:297] + "..."
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


def _check_transformers_options(loss: str | None, inputs: bool, origin: str) -> None:
    """A SpecError for `--loss` or `--input` on a transformers model, which would otherwise
    be ignored (its own loss and its own inputs are used)."""
    problems = []
    if loss:
        problems.append(
            f"--loss {loss} is for a plain module: {origin} is a transformers model, "
            "which computes its own loss from the labels; for another loss give "
            "--step-fn pkg.module:fn(model, batch) -> loss"
        )
    if inputs:
        problems.append(
            f"--input is for a plain module: {origin} is a transformers model, whose inputs "
            "are made from --seq and --batch; drop --input"
        )
    if problems:
        raise SpecError(problems)


def _hf_program(
    spec: TrainSpec,
    config: Any,
    chosen: ModelClass,
    device: torch.device,
    origin: str,
    catalog: bool = False,
) -> StepProgram:
    _check_transformers_options(spec.loss, bool(spec.inputs), origin)
    transformers = _transformers()
    task = chosen.task
    if hasattr(config, "use_cache") and (spec.use_cache is not None or catalog):
        # NB: a user's config keeps its own use_cache unless asked (transformers builds a KV
        # cache in a train-mode forward when it is on); a catalog model is built without one.
        config.use_cache = bool(spec.use_cache)
    prepare_config(config, task)
    cls = getattr(transformers, chosen.name, None)
    if cls is None:
        raise ModelLoadError(
            f"{origin}: transformers {transformers.__version__} has no {chosen.name}"
        )
    try:
        with torch.device(device):
            # NB: built in fp32 whatever the config declares; `build_program` puts the frozen
            # parts in their load dtype (see trainfit.models.weights)
            model = cls._from_config(config, dtype=torch.float32)
    except Exception as exc:  # NB: a config's value of the wrong type fails in the build
        raise ModelLoadError(
            f"{origin}: transformers cannot build {chosen.name} ({task.value}) from its config: "
            f"{_words(exc)}"
        ) from exc
    rows = spec.rows
    inputs, seq = _hf_inputs(spec, config, task, origin)

    def make_batch(dev: torch.device, real: bool) -> Batch:
        batch = _make_tensors(inputs, rows, dev, real)
        if task is HfTask.CAUSAL_LM:
            batch["labels"] = batch["input_ids"]
        return batch

    def compute_loss(m: nn.Module, batch: Batch) -> torch.Tensor:
        return m(**batch).loss

    note = _task_note(task, config)
    tokens = seq * (MULTIPLE_CHOICES if task is HfTask.MULTIPLE_CHOICE else 1)
    return StepProgram(
        model=model,
        make_batch=make_batch,
        compute_loss=compute_loss,
        description=Description(source=origin, model=config.model_type, task=note),
        loss_note=OwnLoss(task=note),
        is_hf=True,
        tokens_per_sample=tokens if task in TEXT_TASKS else None,
        task=task.value,
        model_class=chosen,
    )


def _hf_inputs(
    spec: TrainSpec, config: Any, task: HfTask, origin: str
) -> tuple[list[InputSpec], int]:
    """The inputs of a transformers model's step for `task`, and their sequence length."""
    rows = spec.rows
    vocab = getattr(config, "vocab_size", None)
    seq = 0
    if task in TEXT_TASKS:
        seq = _text_length(spec, config, origin)
        if task in (HfTask.CAUSAL_LM, HfTask.MASKED_LM, HfTask.SEQ2SEQ_LM):
            inputs = [
                InputSpec(name="input_ids", dims=(rows, seq), dtype=torch.int64, high=vocab),
            ]
            if task is not HfTask.CAUSAL_LM:
                inputs.append(
                    InputSpec(name="labels", dims=(rows, seq), dtype=torch.int64, high=vocab)
                )
        else:
            inputs = head_inputs(task, config, rows, seq)
    elif task is HfTask.SPEECH_SEQ2SEQ:
        frames = 2 * config.max_source_positions
        seq = spec.seq_len or min(128, config.max_target_positions)
        inputs = [
            InputSpec(name="input_features", dims=(rows, config.num_mel_bins, frames)),
            InputSpec(name="labels", dims=(rows, seq), dtype=torch.int64, high=vocab),
        ]
    else:
        size = getattr(config, "image_size", 224)
        channels = getattr(config, "num_channels", 3)
        inputs = [
            InputSpec(name="pixel_values", dims=(rows, channels, size, size)),
            InputSpec(name="labels", dims=(rows,), dtype=torch.int64, high=config.num_labels),
        ]
    return inputs, seq


def _text_length(spec: TrainSpec, config: Any, origin: str) -> int:
    """The sequence length of a text model's input: the spec's, else up to DEFAULT_SEQ_LEN."""
    limit = getattr(config, "max_position_embeddings", None) or getattr(config, "n_positions", None)
    seq = spec.seq_len or min(DEFAULT_SEQ_LEN, limit or DEFAULT_SEQ_LEN)
    if limit is not None and seq > limit and config.model_type not in ("t5", "mt5"):
        raise SpecError(
            [f"seq_len {seq} exceeds the model's maximum of {limit} positions ({origin})"]
        )
    return seq


def _task_note(task: HfTask, config: Any) -> TaskNote:
    if task is HfTask.SEQUENCE_CLASSIFICATION:
        return TaskNote(task=task, labels=config.num_labels, problem=sequence_problem(config))
    if task is HfTask.TOKEN_CLASSIFICATION:
        return TaskNote(task=task, labels=config.num_labels)
    return TaskNote(task=task)


# --- plain modules --------------------------------------------------------------------------


def _module_program(
    spec: TrainSpec,
    factory_path: str,
    default_inputs: tuple[str, ...],
    device: torch.device,
    origin: str,
) -> StepProgram:
    if spec.task:
        raise SpecError([_task_on_a_module(spec.task, origin)])
    factory = resolve(factory_path, "model factory")
    try:
        with torch.device(device):
            model = factory()
    except TrainfitError:
        raise
    except USER_CODE_ERRORS as exc:  # NB: the user's factory may raise anything
        raise ModelLoadError(
            f"model factory {factory_path} failed: {raised_in_user_code(exc)}"
        ) from exc
    if not isinstance(model, nn.Module):
        raise ModelLoadError(
            f"model factory {factory_path} returned {type(model).__name__}, not a torch.nn.Module"
        )
    sequence: tuple[str, int, int] | None = None
    if not default_inputs:
        # A factory's module may declare `DEFAULT_INPUTS = {"factory": ("x=B,...:dtype", ...)}`
        # and `SEQUENCE_DIMS = {"factory": (input name, dimension, most positions)}`.
        module = importlib.import_module(factory_path.partition(":")[0])
        factory_name = factory_path.partition(":")[2]
        declared = getattr(module, "DEFAULT_INPUTS", {})
        default_inputs = tuple(declared.get(factory_name, ()))
        sequence = getattr(module, "SEQUENCE_DIMS", {}).get(factory_name)
    inputs = spec.inputs or tuple(InputSpec.parse(text) for text in default_inputs)
    if spec.seq_len is not None:
        inputs = _with_sequence_length(inputs, spec, factory_path, sequence)
    if not inputs:
        raise SpecError(
            [
                f"{factory_path} needs its inputs: add --input NAME=B,...:DTYPE "
                "for each forward() argument"
            ]
        )
    if spec.precision is Precision.PURE_BF16:
        # NB: a pure-bf16 model takes bf16 inputs: floating inputs are cast as a user would.
        inputs = tuple(
            dataclasses.replace(i, dtype=torch.bfloat16) if i.dtype.is_floating_point else i
            for i in inputs
        )
    rows = spec.rows

    def make_batch(dev: torch.device, real: bool) -> Batch:
        return _make_tensors(inputs, rows, dev, real)

    if spec.loss:
        user_loss = resolve(spec.loss, "loss function")
        note: LossNote = UserLoss(path=spec.loss)

        def compute_loss(m: nn.Module, batch: Batch) -> torch.Tensor:
            return user_loss(m(**batch), batch)

    else:
        note = DefaultLoss()

        def compute_loss(m: nn.Module, batch: Batch) -> torch.Tensor:
            return default_loss(m(**batch))

    return StepProgram(
        model=model,
        make_batch=make_batch,
        compute_loss=_checked_loss(compute_loss, f"the loss of {factory_path}"),
        description=Description(source=origin, model=type(model).__name__),
        loss_note=note,
        is_hf=False,
    )


def _with_sequence_length(
    inputs: tuple[InputSpec, ...],
    spec: TrainSpec,
    factory_path: str,
    sequence: tuple[str, int, int] | None,
) -> tuple[InputSpec, ...]:
    """The default inputs with `spec.seq_len` in the factory's declared sequence dimension."""
    seq = spec.seq_len
    if spec.inputs:
        raise SpecError(
            [
                f"seq_len {seq} and --input both given for {factory_path}: put the sequence "
                "length in the --input shape"
            ]
        )
    if sequence is None:
        shapes = " ".join(f"{i.name}={','.join(map(str, i.dims))}" for i in inputs)
        raise SpecError(
            [
                f"seq_len {seq} does not apply to {factory_path} (its inputs are {shapes}): "
                "give the shapes with --input"
            ]
        )
    name, dim, most = sequence
    if seq is not None and seq > most:
        raise SpecError([f"seq_len {seq} exceeds {factory_path}'s maximum of {most} positions"])
    return tuple(
        dataclasses.replace(i, dims=(*i.dims[:dim], seq, *i.dims[dim + 1 :]))
        if i.name == name
        else i
        for i in inputs
    )


def default_loss(output: Any) -> torch.Tensor:
    """Cross-entropy against random class targets for (N, C) outputs, else the output's mean.

    An output carrying `.loss` (or a dict with "loss") is used as is.
    """
    if isinstance(output, dict) and "loss" in output:
        output = output["loss"]
    elif not isinstance(output, torch.Tensor) and hasattr(output, "loss"):
        output = output.loss
    elif isinstance(output, (tuple, list)) and output and isinstance(output[0], torch.Tensor):
        output = output[0]
    if not isinstance(output, torch.Tensor):
        raise TrainfitError(
            f"cannot make a loss from a {type(output).__name__} output: give --loss pkg.module:fn"
        )
    if output.dim() == 2 and output.is_floating_point() and output.numel() > 1:
        n, classes = output.shape
        if output.device.type == "meta":
            targets = torch.empty(n, dtype=torch.int64, device=output.device)
        else:
            targets = torch.randint(classes, (n,), device=output.device)
        return F.cross_entropy(output, targets)
    return output.float().mean() if output.numel() > 1 else output.reshape(())


def _make_tensors(inputs: Any, rows: int, device: torch.device, real: bool) -> Batch:
    batch: Batch = {}
    for spec in inputs:
        shape = spec.shape(rows)
        if not real or device.type == "meta":
            batch[spec.name] = torch.empty(shape, dtype=spec.dtype, device=device)
        elif spec.dtype.is_floating_point:
            batch[spec.name] = torch.randn(shape, dtype=spec.dtype, device=device)
        elif spec.dtype == torch.bool:
            batch[spec.name] = torch.ones(shape, dtype=torch.bool, device=device)
        else:
            batch[spec.name] = torch.randint(spec.high or 2, shape, dtype=spec.dtype, device=device)
    return batch
