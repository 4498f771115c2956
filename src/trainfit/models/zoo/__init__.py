"""Small reference models, written in plain PyTorch, from users' own training notes.

Each factory takes no required arguments and returns an ``nn.Module`` whose forward either
returns logits ``(N, C)`` (so trainfit's default cross-entropy loss applies) or the scalar
training loss itself (so trainfit's default "mean of the output" is the real loss).

The notes (their specs and reports are in the repository's ``examples/seeds/``):

- the iDAW notes: "iDAW Hardware Training Specifications", 2025-12-29.
  Names EmotionRecognizer, MelodyTransformer and GroovePredictor, the 128-feature input of the
  emotion model, ``hidden_dim: 256`` / ``num_layers: 4`` / ``dropout: 0.2``, batch 16 and 64.
- the MIDI notes: "Compute Requirements and M1 Pro Capabilities". A MIDI
  transformer of "100M parameters" on 1024-2048 tokens; "Medium Models" of 100M-350M and
  "Large Models" of more than 350M parameters.
- the speaker notes: "GPU Requirements for MRL Training" (ReDimNet-b2 with
  a Matryoshka projection). Gives 4.7M parameters, ``F: 72``, ``C: 12``, ``out_channels: 512``,
  audio ``[B, 1, 48000]`` -> mel ``[B, 72, 300]``, 6 backbone stages, pooled ``[B, 1024]``,
  ``embed_dim: 256`` and 5,994 VoxCeleb2 speakers.
- the VQ notes: "Training requirements and low-memory options" of a
  VQ patch autoencoder. Gives the encoder and decoder shapes and batch = batch_size x n_patches.

Where the notes are silent the docstring says "guess"; each model is then a plausible, documented
version, not the original. Every model builds under ``with torch.device("meta"):`` and runs
forward and backward on meta tensors: no ``.item()``, no data-dependent shapes.

Known limitations:
    ``melody_transformer``, ``melody_lstm``, ``emotion_mlp`` and ``groove_predictor`` are
    reconstructions: the iDAW notes name the models but not their layers; ``midi_transformer_*``
    have the MIDI notes' sizes in ``melody_transformer``'s family, not SkyTNT's Llama layers.
    ``redimnet_like`` keeps ReDimNet's defining property (the 2D map ``C x F`` keeps the same
    volume, ``12 x 72 = 864``, so it can be reshaped to a 1D signal between stages) but not its
    exact blocks. ``vq_patch_autoencoder`` has the notes'
    exact shapes but fewer parameters than the notes' "few million", which includes unnamed heads.
"""

from __future__ import annotations

from collections.abc import Callable

from torch import nn

from trainfit.models.zoo.autoencoder import vq_patch_autoencoder
from trainfit.models.zoo.music import (
    GROOVE_STEPS,
    GROOVE_VOICES,
    MELODY_SEQ_LEN,
    MIDI_EVENT_VOCAB,
    MIDI_SEQ_LEN,
    emotion_mlp,
    groove_predictor,
    melody_lstm,
    melody_transformer,
    midi_transformer_100m,
    midi_transformer_350m,
    midi_transformer_760m,
)
from trainfit.models.zoo.resnet import resnet50
from trainfit.models.zoo.speaker import redimnet_like

__all__ = [
    "DEFAULT_INPUTS",
    "FACTORIES",
    "SEQUENCE_DIMS",
    "emotion_mlp",
    "groove_predictor",
    "melody_lstm",
    "melody_transformer",
    "midi_transformer_100m",
    "midi_transformer_350m",
    "midi_transformer_760m",
    "redimnet_like",
    "resnet50",
    "vq_patch_autoencoder",
]

# ---------------------------------------------------------------------------------------------
# Catalogue
# ---------------------------------------------------------------------------------------------

FACTORIES: dict[str, Callable[[], nn.Module]] = {
    "emotion_mlp": emotion_mlp,
    "groove_predictor": groove_predictor,
    "melody_lstm": melody_lstm,
    "melody_transformer": melody_transformer,
    "midi_transformer_100m": midi_transformer_100m,
    "midi_transformer_350m": midi_transformer_350m,
    "midi_transformer_760m": midi_transformer_760m,
    "redimnet_like": redimnet_like,
    "resnet50": resnet50,
    "vq_patch_autoencoder": vq_patch_autoencoder,
}
"""Every factory of this module by name."""

DEFAULT_INPUTS: dict[str, tuple[str, ...]] = {
    "emotion_mlp": ("x=B,128:float32",),
    "groove_predictor": (
        f"hits=B,{GROOVE_STEPS},{GROOVE_VOICES}:float32",
        f"target=B,{GROOVE_STEPS},{2 * GROOVE_VOICES}:float32",
    ),
    "melody_lstm": (f"tokens=B,{MELODY_SEQ_LEN}:int64<{MIDI_EVENT_VOCAB}",),
    "melody_transformer": (f"tokens=B,{MELODY_SEQ_LEN}:int64<{MIDI_EVENT_VOCAB}",),
    "midi_transformer_100m": (f"tokens=B,{MIDI_SEQ_LEN}:int64<{MIDI_EVENT_VOCAB}",),
    "midi_transformer_350m": (f"tokens=B,{MIDI_SEQ_LEN}:int64<{MIDI_EVENT_VOCAB}",),
    "midi_transformer_760m": (f"tokens=B,{MIDI_SEQ_LEN}:int64<{MIDI_EVENT_VOCAB}",),
    "redimnet_like": ("x=B,1,72,300:float32",),
    "resnet50": ("x=B,3,224,224:float32",),
    # NB: trainfit multiplies B by n_patches itself (the VQ notes: batch_size x n_patches patches).
    "vq_patch_autoencoder": ("x=B,1,64,64:float32",),
}
"""Default inputs per factory in trainfit's syntax ``name=DIMS:dtype[<bound]``; ``B`` is the
micro-batch and ``<bound`` an exclusive upper bound on integer values. Names match forward's."""

SEQUENCE_DIMS: dict[str, tuple[str, int, int]] = {
    "melody_lstm": ("tokens", 1, 1 << 20),
    "melody_transformer": ("tokens", 1, 1024),
    "midi_transformer_100m": ("tokens", 1, 2048),
    "midi_transformer_350m": ("tokens", 1, 2048),
    "midi_transformer_760m": ("tokens", 1, 2048),
}
"""Where `--seq` goes for the sequence models: (input name, dimension, most positions; the
transformer's learned position table has 1024 rows)."""
