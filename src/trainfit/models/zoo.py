"""Small reference models, written in plain PyTorch, from the project's seed documents.

Each factory takes no required arguments and returns an ``nn.Module`` whose forward either
returns logits ``(N, C)`` (so trainfit's default cross-entropy loss applies) or the scalar
training loss itself (so trainfit's default "mean of the output" is the real loss).

The seed documents live in ``shared/seeds/``:

- seed 000 (``000_6e27c148ab9a2eab.txt``): "iDAW Hardware Training Specifications", 2025-12-29.
  Names EmotionRecognizer, MelodyTransformer and GroovePredictor, the 128-feature input of the
  emotion model, ``hidden_dim: 256`` / ``num_layers: 4`` / ``dropout: 0.2``, batch 16 and 64.
- seed 001 (``001_faf39e4a6bcd91fc.txt``): "Compute Requirements and M1 Pro Capabilities". A MIDI
  transformer of "100M parameters" on 1024-2048 tokens; "Medium Models" of 100M-350M and
  "Large Models" of more than 350M parameters.
- seed 002 (``002_0991938c9c14215a.txt``): "GPU Requirements for MRL Training" (ReDimNet-b2 with
  a Matryoshka projection). Gives 4.7M parameters, ``F: 72``, ``C: 12``, ``out_channels: 512``,
  audio ``[B, 1, 48000]`` -> mel ``[B, 72, 300]``, 6 backbone stages, pooled ``[B, 1024]``,
  ``embed_dim: 256`` and 5,994 VoxCeleb2 speakers.
- seed 004 (``004_c7cb76ef547eeece.txt``): "Training requirements and low-memory options" of a
  VQ patch autoencoder. Gives the encoder and decoder shapes and batch = batch_size x n_patches.

Where a seed is silent the docstring says "guess"; each model is then a plausible, documented
version, not the original. Every model builds under ``with torch.device("meta"):`` and runs
forward and backward on meta tensors: no ``.item()``, no data-dependent shapes.

Known limitations:
    ``melody_transformer``, ``melody_lstm``, ``emotion_mlp`` and ``groove_predictor`` are
    reconstructions: seed 000 names the models but not their layers; ``midi_transformer_*``
    have seed 001's sizes in ``melody_transformer``'s family, not SkyTNT's Llama layers.
    ``redimnet_like`` keeps ReDimNet's defining property (the 2D map ``C x F`` keeps the same
    volume, ``12 x 72 = 864``, so it can be reshaped to a 1D signal between stages) but not its
    exact blocks. ``vq_patch_autoencoder`` has the seed's
    exact shapes but fewer parameters than the seed's "few million", which includes unnamed heads.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable

import torch
import torch.nn.functional as F
from torch import nn

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
# Seed 000: iDAW music models
# ---------------------------------------------------------------------------------------------

MIDI_EVENT_VOCAB = 388
"""Guess: the MIDI-like event vocabulary of Music Transformer (Huang et al., 2018): 128 note-on,
128 note-off, 100 time-shift and 32 velocity events. Seed 000 trains on Lakh MIDI but names no
tokenisation."""

MELODY_SEQ_LEN = 256
"""Guess: tokens per training sequence; seed 000 gives no sequence length."""


def _mlp_layer(n_in: int, n_out: int, dropout: float) -> nn.Sequential:
    """Linear -> BatchNorm1d -> ReLU -> Dropout."""
    return nn.Sequential(
        nn.Linear(n_in, n_out), nn.BatchNorm1d(n_out), nn.ReLU(), nn.Dropout(dropout)
    )


class _EmotionMLP(nn.Module):
    """MLP classifier over a feature vector; forward's argument is named ``x``."""

    def __init__(self, widths: tuple[int, ...], num_classes: int, dropout: float) -> None:
        super().__init__()
        layers = [_mlp_layer(a, b, dropout) for a, b in itertools.pairwise(widths)]
        self.layers = nn.Sequential(*layers, nn.Linear(widths[-1], num_classes))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """x (B, widths[0]) float -> logits (B, num_classes)."""
        return self.layers(x)


def emotion_mlp(num_classes: int = 7) -> nn.Module:
    """Seed 000's EmotionRecognizer as an MLP classifier: 128 -> 512 -> 256 -> 128 -> classes.

    From seed 000: the input is 128 audio features (its benchmark calls
    ``model(torch.randn(1, 128))``) and ``dropout: 0.2``. Guess: the widths 512/256/128 (the
    public iDAW code, github.com/sburdges-eng/miDiKompanion, has an EmotionRecognizer that also
    starts 128 -> 512 -> 256, then an LSTM to a 64-d embedding), BatchNorm + ReLU, and 7 emotion
    classes (Ekman's six basic emotions plus neutral); the seed lists no classes.

    forward(x: (B, 128) float) -> logits (B, num_classes). 232,967 parameters with 7 classes.
    """
    return _EmotionMLP((128, 512, 256, 128), num_classes, dropout=0.2)


class _CausalSelfAttention(nn.Module):
    """Multi-head causal self-attention through ``F.scaled_dot_product_attention``."""

    def __init__(self, dim: int, heads: int, dropout: float) -> None:
        super().__init__()
        self.heads = heads
        self.dropout = dropout
        self.qkv = nn.Linear(dim, 3 * dim)
        self.proj = nn.Linear(dim, dim)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """(B, T, D) -> (B, T, D)."""
        b, t, d = x.shape
        q, k, v = self.qkv(x).view(b, t, 3, self.heads, d // self.heads).permute(2, 0, 3, 1, 4)
        p = self.dropout if self.training else 0.0
        y = F.scaled_dot_product_attention(q, k, v, dropout_p=p, is_causal=True)
        return self.proj(y.transpose(1, 2).reshape(b, t, d))


class _TransformerBlock(nn.Module):
    """Pre-LayerNorm decoder block: causal attention then a 4x GELU MLP, both residual."""

    def __init__(self, dim: int, heads: int, dropout: float) -> None:
        super().__init__()
        self.ln1 = nn.LayerNorm(dim)
        self.attn = _CausalSelfAttention(dim, heads, dropout)
        self.ln2 = nn.LayerNorm(dim)
        self.mlp = nn.Sequential(
            nn.Linear(dim, 4 * dim), nn.GELU(), nn.Linear(4 * dim, dim), nn.Dropout(dropout)
        )
        self.drop = nn.Dropout(dropout)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """(B, T, D) -> (B, T, D)."""
        x = x + self.drop(self.attn(self.ln1(x)))
        return x + self.mlp(self.ln2(x))


class _MelodyTransformer(nn.Module):
    """Decoder-only transformer over MIDI event tokens; logits flattened to (B*T, vocab)."""

    def __init__(
        self, vocab: int, dim: int, layers: int, heads: int, max_len: int, dropout: float
    ) -> None:
        super().__init__()
        self.tok = nn.Embedding(vocab, dim)
        self.pos = nn.Embedding(max_len, dim)
        self.drop = nn.Dropout(dropout)
        self.blocks = nn.ModuleList(_TransformerBlock(dim, heads, dropout) for _ in range(layers))
        self.ln_f = nn.LayerNorm(dim)
        self.head = nn.Linear(dim, vocab)

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        """tokens (B, T) int64 -> logits (B*T, vocab)."""
        positions = torch.arange(tokens.shape[1], device=tokens.device)
        x = self.drop(self.tok(tokens) + self.pos(positions))
        for block in self.blocks:
            x = block(x)
        logits = self.head(self.ln_f(x))
        return logits.reshape(-1, logits.shape[-1])


def melody_transformer() -> nn.Module:
    """Seed 000's MelodyTransformer as a small decoder-only transformer over MIDI events.

    From seed 000: the name, Lakh MIDI data, ``hidden_dim: 256`` and ``num_layers: 4`` (its
    memory tips "reduce from 256" and "reduce from 4") and ``dropout: 0.2``. Guess: a GPT-style
    pre-LN decoder, 8 heads, 4x MLP, learned positions up to 1024, the 388-event vocabulary of
    ``MIDI_EVENT_VOCAB`` and 256-token sequences. The seed describes no layers.

    forward(tokens: (B, T) int64 < 388) -> logits (B*T, 388). 3,620,740 parameters.
    """
    return _MelodyTransformer(
        MIDI_EVENT_VOCAB, dim=256, layers=4, heads=8, max_len=1024, dropout=0.2
    )


class _MelodyLSTM(nn.Module):
    """Token embedding -> multi-layer LSTM -> vocabulary logits flattened to (B*T, vocab)."""

    def __init__(self, vocab: int, dim: int, layers: int, dropout: float) -> None:
        super().__init__()
        self.tok = nn.Embedding(vocab, dim)
        self.lstm = nn.LSTM(dim, dim, num_layers=layers, batch_first=True, dropout=dropout)
        self.head = nn.Linear(dim, vocab)

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        """tokens (B, T) int64 -> logits (B*T, vocab)."""
        y, _ = self.lstm(self.tok(tokens))
        logits = self.head(y)
        return logits.reshape(-1, logits.shape[-1])


def melody_lstm() -> nn.Module:
    """An LSTM variant of seed 000's melody model (one ``nn.LSTM``, so cuDNN LSTM on CUDA).

    From seed 000: ``hidden_dim: 256``, ``num_layers: 4`` and ``dropout: 0.2``. Seed 000 does not
    say that GroovePredictor is an LSTM, so this is the melody model, not a groove model. Guess:
    embedding width 256 and the 388-event vocabulary of ``MIDI_EVENT_VOCAB``. (The public iDAW
    code, sburdges-eng/miDiKompanion ``music_brain/models/melody_transformer.py``, builds its
    "MelodyTransformer" around an ``nn.LSTM(256, 256)``.)

    forward(tokens: (B, T) int64 < 388) -> logits (B*T, 388). 2,304,388 parameters.
    """
    return _MelodyLSTM(MIDI_EVENT_VOCAB, dim=256, layers=4, dropout=0.2)


GROOVE_STEPS = 32
"""Guess: two bars of sixteenth notes per sample, as in Magenta's GrooVAE (Gillick et al., 2019),
whose Groove MIDI Dataset is the usual data for groove models; seed 000 names no data for
GroovePredictor."""

GROOVE_VOICES = 9
"""Guess: GrooVAE's nine drum voices (kick, snare, closed and open hi-hat, three toms, crash,
ride)."""


class _GroovePredictor(nn.Module):
    """Drum hits (B, T, voices) -> each hit's velocity and timing offset; returns the loss."""

    def __init__(self, voices: int, steps: int, dim: int, layers: int, heads: int) -> None:
        super().__init__()
        self.inp = nn.Linear(voices, dim)
        self.pos = nn.Embedding(steps, dim)
        self.blocks = nn.ModuleList(_TransformerBlock(dim, heads, 0.2) for _ in range(layers))
        self.ln_f = nn.LayerNorm(dim)
        self.head = nn.Linear(dim, 2 * voices)

    def forward(self, hits: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
        """hits (B, T, voices), target (B, T, 2*voices) float -> scalar MSE loss."""
        positions = torch.arange(hits.shape[1], device=hits.device)
        x = self.inp(hits) + self.pos(positions)
        for block in self.blocks:
            x = block(x)
        return F.mse_loss(self.head(self.ln_f(x)), target)


def groove_predictor() -> nn.Module:
    """Seed 000's GroovePredictor as a small transformer that humanises a drum pattern.

    From seed 000: the name, ``hidden_dim: 256``, ``num_layers: 4`` and ``dropout: 0.2`` (its
    memory tips, which apply to all three models), and the fact that it trains 3-5 times faster
    than the melody model (a 1-2 min against an 8-10 min epoch). Guess: GrooVAE's task (Gillick
    et al., 2019): from which of 9 drum voices hit on each of 32 sixteenth-note steps, predict
    each hit's velocity and timing offset (MSE). A pre-LN causal transformer as in
    ``melody_transformer``; the seed describes no layers.

    forward(hits: (B, 32, 9) float, target: (B, 32, 18) float) -> scalar loss.
    3,174,930 parameters.
    """
    return _GroovePredictor(GROOVE_VOICES, GROOVE_STEPS, dim=256, layers=4, heads=8)


# ---------------------------------------------------------------------------------------------
# Seed 001: MIDI transformers of 100M, 350M and 760M parameters
# ---------------------------------------------------------------------------------------------

MIDI_SEQ_LEN = 1024
"""Seed 001: "Sequence Length: 1024-2048 tokens" for small models, 512-1024 for medium ones."""


def midi_transformer_100m() -> nn.Module:
    """Seed 001's "100M parameter" MIDI model: a GPT-style decoder, 768 wide and 14 deep.

    From seed 001: about 100M parameters ("Example: 100M model", "Model Weights: ~400 MB
    (fp32)") and sequences of 1024-2048 tokens. Guess: the pre-LN decoder of
    ``melody_transformer`` (12 heads, 4x MLP, learned positions up to 2048) over the
    388-event vocabulary of ``MIDI_EVENT_VOCAB``; 14 blocks of width 768 bring it to 100M. The
    seed's example, SkyTNT's midi-model, is Llama-based with its own tokenizer; its layers are
    not in the seed.

    forward(tokens: (B, T) int64 < 388) -> logits (B*T, 388). 101,400,964 parameters.
    """
    return _MelodyTransformer(
        MIDI_EVENT_VOCAB, dim=768, layers=14, heads=12, max_len=2048, dropout=0.1
    )


def midi_transformer_350m() -> nn.Module:
    """Seed 001's upper "Medium Models" size (100M-350M parameters): 1024 wide, 28 deep.

    Same family as ``midi_transformer_100m`` (guess), 16 heads, positions up to 2048.

    forward(tokens: (B, T) int64 < 388) -> logits (B*T, 388). 355,588,484 parameters.
    """
    return _MelodyTransformer(
        MIDI_EVENT_VOCAB, dim=1024, layers=28, heads=16, max_len=2048, dropout=0.1
    )


def midi_transformer_760m() -> nn.Module:
    """A "Large Models" size of seed 001 (more than 350M parameters): 1536 wide, 27 deep.

    Same family as ``midi_transformer_100m`` (guess), 16 heads; the size of GPT-2 large.

    forward(tokens: (B, T) int64 < 388) -> logits (B*T, 388). 769,292,164 parameters.
    """
    return _MelodyTransformer(
        MIDI_EVENT_VOCAB, dim=1536, layers=27, heads=16, max_len=2048, dropout=0.1
    )


# ---------------------------------------------------------------------------------------------
# Seed 002: ReDimNet-b2-like speaker embedding
# ---------------------------------------------------------------------------------------------

VOXCELEB2_SPEAKERS = 5994
"""Seed 002: VoxCeleb2 has 5,994 training speakers (``AAMSoftmax(256, 5994)``)."""


def _conv_bn_2d(
    c_in: int, c_out: int, kernel: tuple[int, int], stride: tuple[int, int]
) -> list[nn.Module]:
    """Conv2d (no bias, 'same' padding for odd kernels) followed by BatchNorm2d."""
    pad = (kernel[0] // 2 if stride[0] == 1 else 0, kernel[1] // 2 if stride[1] == 1 else 0)
    return [nn.Conv2d(c_in, c_out, kernel, stride, pad, bias=False), nn.BatchNorm2d(c_out)]


class _ResBlock2d(nn.Module):
    """ResNet basic block: 3x3 conv-BN-ReLU, 3x3 conv-BN, identity shortcut, ReLU."""

    def __init__(self, ch: int) -> None:
        super().__init__()
        self.body = nn.Sequential(
            *_conv_bn_2d(ch, ch, (3, 3), (1, 1)), nn.ReLU(), *_conv_bn_2d(ch, ch, (3, 3), (1, 1))
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """(B, C, F, T) -> (B, C, F, T)."""
        return F.relu(x + self.body(x))


class _ResBlock1d(nn.Module):
    """Time-axis block on the reshaped (B, C*F, T) signal: depthwise k=3 conv, BN, bottleneck."""

    def __init__(self, ch: int, hidden: int) -> None:
        super().__init__()
        self.body = nn.Sequential(
            nn.Conv1d(ch, ch, 3, padding=1, groups=ch, bias=False),
            nn.BatchNorm1d(ch),
            nn.Conv1d(ch, hidden, 1),
            nn.ReLU(),
            nn.Conv1d(hidden, ch, 1),
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """(B, D, T) -> (B, D, T)."""
        return x + self.body(x)


class _ReDimStage(nn.Module):
    """Frequency downsample (channels x stride), 2D residual blocks, then a 1D block on C*F."""

    def __init__(self, ch_in: int, freq_in: int, stride: int, blocks: int, hidden_1d: int) -> None:
        super().__init__()
        ch = ch_in * stride
        down = _conv_bn_2d(ch_in, ch, (stride, 1), (stride, 1)) if stride > 1 else []
        self.blocks2d = nn.Sequential(*down, *(_ResBlock2d(ch) for _ in range(blocks)))
        self.block1d = _ResBlock1d(ch * (freq_in // stride), hidden_1d)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """(B, C, F, T) -> (B, C*stride, F/stride, T); C*F is unchanged."""
        x = self.blocks2d(x)
        b, c, f, t = x.shape
        return self.block1d(x.reshape(b, c * f, t)).reshape(b, c, f, t)


class _AttentiveStatsPool(nn.Module):
    """Attentive statistics pooling (Okabe et al., 2018): weighted mean and std over time."""

    def __init__(self, ch: int, hidden: int) -> None:
        super().__init__()
        self.attn = nn.Sequential(
            nn.Conv1d(ch, hidden, 1), nn.Tanh(), nn.Conv1d(hidden, ch, 1), nn.Softmax(dim=2)
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """(B, C, T) -> (B, 2C)."""
        w = self.attn(x)
        mean = (w * x).sum(dim=2)
        var = (w * x * x).sum(dim=2) - mean * mean
        return torch.cat([mean, var.clamp(min=1e-5).sqrt()], dim=1)


class _ReDimNetLike(nn.Module):
    """Mel (B, 1, F, T) -> stem -> ``stages`` -> 1D conv -> ASP -> 256-d embedding -> logits."""

    def __init__(
        self,
        freq: int,
        ch: int,
        strides: tuple[int, ...],
        blocks: tuple[int, ...],
        hidden_1d: int,
        out_channels: int,
        embed_dim: int,
        num_classes: int,
    ) -> None:
        super().__init__()
        self.stem = nn.Sequential(*_conv_bn_2d(1, ch, (3, 3), (1, 1)), nn.ReLU())
        self.stages = nn.ModuleList()
        for stride, n in zip(strides, blocks, strict=True):
            self.stages.append(_ReDimStage(ch, freq, stride, n, hidden_1d))
            ch, freq = ch * stride, freq // stride
        self.to_1d = nn.Sequential(
            nn.Conv1d(ch * freq, out_channels, 1, bias=False),
            nn.BatchNorm1d(out_channels),
            nn.ReLU(),
        )
        self.pool = _AttentiveStatsPool(out_channels, 128)
        self.proj = nn.Sequential(
            nn.BatchNorm1d(2 * out_channels), nn.Linear(2 * out_channels, embed_dim)
        )
        # NB: a plain bias-free linear stands in for the seed's AAM-softmax weight (256 x 5994).
        self.head = nn.Linear(embed_dim, num_classes, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """x (B, 1, F, T) float -> logits (B, num_classes)."""
        x = self.stem(x)
        for stage in self.stages:
            x = stage(x)
        b, c, f, t = x.shape
        x = self.pool(self.to_1d(x.reshape(b, c * f, t)))
        return self.head(self.proj(x))


def redimnet_like(num_classes: int = VOXCELEB2_SPEAKERS) -> nn.Module:
    """Seed 002's ReDimNet-b2 speaker model: a 4.8M-parameter embedding net plus a speaker head.

    From seed 002: mel input 72 x 300 (``F: 72``; 48,000 samples at 16 kHz), ``C: 12``, 6
    backbone stages, ``out_channels: 512``, pooled features ``[B, 1024]`` (mean and std of 512
    channels), a projection head to ``embed_dim: 256`` (the seed's "MRL projection"), and a
    256 x 5994 speaker classifier. The embedding network (everything but ``head``) has 4,803,572
    parameters: 2.2% over the seed's "4.7M" for ReDimNet-b2 and 0.2% under its "Model
    parameters: 4,812,000" with the projection. The seed counts the 1,534,464-weight
    AAM-softmax head separately, in the loss. Total with ``head``: 6,338,036 parameters.

    Guess: the input is the mel spectrogram (the parameter-free MelBanks front end is left out),
    frequency strides (1, 2, 3, 2, 1, 2) keeping C*F = 12*72 = 864, 2D blocks per stage
    (1, 2, 2, 2, 1, 1) as ResNet basic blocks, one depthwise-separable 1D block per stage on the
    864-channel signal (bottleneck 96), an attentive-statistics-pooling hidden width of 128, and
    a plain linear head instead of AAM-softmax margins (same weight shape and memory).

    forward(x: (B, 1, 72, 300) float) -> logits (B, num_classes).
    """
    return _ReDimNetLike(
        freq=72,
        ch=12,
        strides=(1, 2, 3, 2, 1, 2),
        blocks=(1, 2, 2, 2, 1, 1),
        hidden_1d=96,
        out_channels=512,
        embed_dim=256,
        num_classes=num_classes,
    )


# ---------------------------------------------------------------------------------------------
# Seed 004: VQ patch autoencoder
# ---------------------------------------------------------------------------------------------


def _down(c_in: int, c_out: int) -> nn.Sequential:
    """4x4 stride-2 conv halving height and width, BatchNorm, ReLU."""
    return nn.Sequential(nn.Conv2d(c_in, c_out, 4, 2, 1), nn.BatchNorm2d(c_out), nn.ReLU())


def _up(c_in: int, c_out: int) -> nn.Sequential:
    """4x4 stride-2 transposed conv doubling height and width, BatchNorm, ReLU."""
    return nn.Sequential(nn.ConvTranspose2d(c_in, c_out, 4, 2, 1), nn.BatchNorm2d(c_out), nn.ReLU())


class _VectorQuantizer(nn.Module):
    """Nearest-codebook quantiser (van den Oord et al., 2017) with a straight-through estimator."""

    def __init__(self, num_codes: int, dim: int, beta: float) -> None:
        super().__init__()
        self.codebook = nn.Embedding(num_codes, dim)
        self.beta = beta

    def forward(self, z: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """z (N, D, H, W) -> (quantised z with straight-through gradient, codebook+commit loss)."""
        n, d, h, w = z.shape
        flat = z.permute(0, 2, 3, 1).reshape(-1, d)
        codes = self.codebook.weight
        # NB: |z|^2 - 2 z.e + |e|^2, then argmin: fixed shapes, so it also runs on meta tensors.
        dist = flat.pow(2).sum(1, keepdim=True) - 2 * flat @ codes.t() + codes.pow(2).sum(1)
        q = F.embedding(dist.argmin(dim=1), codes).view(n, h, w, d).permute(0, 3, 1, 2)
        loss = F.mse_loss(q, z.detach()) + self.beta * F.mse_loss(z, q.detach())
        return z + (q - z).detach(), loss


class _VQPatchAutoencoder(nn.Module):
    """Encoder ``encoder_blocks`` -> VQ -> decoder ``decoder_blocks``; forward returns the loss."""

    def __init__(self, num_codes: int, beta: float) -> None:
        super().__init__()
        self.encoder_blocks = nn.ModuleList(
            [_down(1, 32), _down(32, 64), _down(64, 96), nn.Conv2d(96, 64, 3, 1, 1)]
        )
        self.quantizer = _VectorQuantizer(num_codes, 64, beta)
        self.decoder_blocks = nn.ModuleList(
            [_up(64, 96), _up(96, 64), _up(64, 32), nn.Conv2d(32, 1, 3, 1, 1)]
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """x (B*n_patches, 1, 64, 64) -> scalar loss: reconstruction MSE + VQ loss."""
        z = x
        for block in self.encoder_blocks:
            z = block(z)
        y, vq_loss = self.quantizer(z)
        for block in self.decoder_blocks:
            y = block(y)
        return F.mse_loss(y, x) + vq_loss


def vq_patch_autoencoder() -> nn.Module:
    """Seed 004's VQ patch autoencoder; forward returns the scalar training loss.

    From seed 004, exactly: encoder 1x64x64 -> 32x32x32 -> 64x16x16 -> 96x8x8 -> 64x8x8 latent,
    decoder 64x8x8 -> 96x16x16 -> 64x32x32 -> 32x64x64 -> 1x64x64, a quantiser with no extra
    activations, and a step batch of batch_size x n_patches patches.

    Guess: 4x4 stride-2 (transposed) convs with BatchNorm + ReLU, 3x3 convs into and out of the
    latent, a 512 x 64 codebook, commitment weight 0.25, MSE reconstruction. 450,529 parameters:
    fewer than the seed's "few million", which includes heads the seed does not describe.

    forward(x: (B*n_patches, 1, 64, 64) float) -> scalar loss.
    """
    return _VQPatchAutoencoder(num_codes=512, beta=0.25)


# ---------------------------------------------------------------------------------------------
# ResNet-50 (torchvision's architecture)
# ---------------------------------------------------------------------------------------------


class _Bottleneck(nn.Module):
    """torchvision's ResNet v1.5 bottleneck: stride on the 3x3 conv, expansion 4."""

    def __init__(self, c_in: int, width: int, stride: int) -> None:
        super().__init__()
        c_out = 4 * width
        self.conv1 = nn.Conv2d(c_in, width, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(width)
        self.conv2 = nn.Conv2d(width, width, 3, stride, 1, bias=False)
        self.bn2 = nn.BatchNorm2d(width)
        self.conv3 = nn.Conv2d(width, c_out, 1, bias=False)
        self.bn3 = nn.BatchNorm2d(c_out)
        self.relu = nn.ReLU(inplace=True)
        self.downsample: nn.Module | None = None
        if stride != 1 or c_in != c_out:
            self.downsample = nn.Sequential(
                nn.Conv2d(c_in, c_out, 1, stride, bias=False), nn.BatchNorm2d(c_out)
            )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """(B, C_in, H, W) -> (B, 4*width, H/stride, W/stride)."""
        identity = x if self.downsample is None else self.downsample(x)
        out = self.relu(self.bn1(self.conv1(x)))
        out = self.relu(self.bn2(self.conv2(out)))
        out = self.bn3(self.conv3(out))
        return self.relu(out + identity)


class _ResNet(nn.Module):
    """torchvision's ResNet with bottleneck blocks; parameter names match its state dict."""

    def __init__(self, layers: tuple[int, int, int, int], num_classes: int) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(3, 64, 7, 2, 3, bias=False)
        self.bn1 = nn.BatchNorm2d(64)
        self.relu = nn.ReLU(inplace=True)
        self.maxpool = nn.MaxPool2d(3, 2, 1)
        c_in = 64
        stages = []
        for i, n in enumerate(layers):
            width = 64 * 2**i
            blocks = [_Bottleneck(c_in, width, 1 if i == 0 else 2)]
            blocks += [_Bottleneck(4 * width, width, 1) for _ in range(n - 1)]
            stages.append(nn.Sequential(*blocks))
            c_in = 4 * width
        self.layer1, self.layer2, self.layer3, self.layer4 = stages
        self.avgpool = nn.AdaptiveAvgPool2d(1)
        self.fc = nn.Linear(c_in, num_classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """x (B, 3, H, W) float -> logits (B, num_classes)."""
        x = self.maxpool(self.relu(self.bn1(self.conv1(x))))
        x = self.layer4(self.layer3(self.layer2(self.layer1(x))))
        return self.fc(torch.flatten(self.avgpool(x), 1))


def resnet50(num_classes: int = 1000) -> nn.Module:
    """ResNet-50 (He et al., 2016) exactly as torchvision builds it (v1.5, blocks [3, 4, 6, 3]).

    Not from a seed: a well-known reference with a known parameter count, 25,557,032 for 1000
    classes (torchvision's ``resnet50``). Weight initialisation is PyTorch's default, not
    torchvision's, which does not change shapes or memory.

    forward(x: (B, 3, 224, 224) float) -> logits (B, num_classes).
    """
    return _ResNet((3, 4, 6, 3), num_classes)


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
    # NB: trainfit multiplies B by n_patches itself (seed 004: batch_size x n_patches patches).
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
