"""Music models of the catalogue: an emotion MLP on 128 audio features, a melody transformer
and LSTM on MIDI events, a drum-groove transformer, and MIDI transformers of 100M, 350M and
760M parameters (sources and guesses in `trainfit.models.zoo`)."""

from __future__ import annotations

import itertools

import torch
import torch.nn.functional as F
from torch import nn

# ---------------------------------------------------------------------------------------------
# From the iDAW notes: iDAW music models
# ---------------------------------------------------------------------------------------------

MIDI_EVENT_VOCAB = 388
"""Guess: the MIDI-like event vocabulary of Music Transformer (Huang et al., 2018): 128 note-on,
128 note-off, 100 time-shift and 32 velocity events. The iDAW notes train on Lakh MIDI but names no
tokenisation."""

MELODY_SEQ_LEN = 256
"""Guess: tokens per training sequence; the iDAW notes give no sequence length."""


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
    """The iDAW notes' EmotionRecognizer as an MLP classifier: 128 -> 512 -> 256 -> 128 -> classes.

    From the iDAW notes: the input is 128 audio features (its benchmark calls
    ``model(torch.randn(1, 128))``) and ``dropout: 0.2``. Guess: the widths 512/256/128 (the
    public iDAW code, github.com/sburdges-eng/miDiKompanion, has an EmotionRecognizer that also
    starts 128 -> 512 -> 256, then an LSTM to a 64-d embedding), BatchNorm + ReLU, and 7 emotion
    classes (Ekman's six basic emotions plus neutral); the notes list no classes.

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
    """The iDAW notes' MelodyTransformer as a small decoder-only transformer over MIDI events.

    From the iDAW notes: the name, Lakh MIDI data, ``hidden_dim: 256`` and ``num_layers: 4`` (its
    memory tips "reduce from 256" and "reduce from 4") and ``dropout: 0.2``. Guess: a GPT-style
    pre-LN decoder, 8 heads, 4x MLP, learned positions up to 1024, the 388-event vocabulary of
    ``MIDI_EVENT_VOCAB`` and 256-token sequences. The notes describe no layers.

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
    """An LSTM variant of the iDAW notes' melody model (one ``nn.LSTM``, so cuDNN LSTM on CUDA).

    From the iDAW notes: ``hidden_dim: 256``, ``num_layers: 4`` and ``dropout: 0.2``. They do not
    say that GroovePredictor is an LSTM, so this is the melody model, not a groove model. Guess:
    embedding width 256 and the 388-event vocabulary of ``MIDI_EVENT_VOCAB``. (The public iDAW
    code, sburdges-eng/miDiKompanion ``music_brain/models/melody_transformer.py``, builds its
    "MelodyTransformer" around an ``nn.LSTM(256, 256)``.)

    forward(tokens: (B, T) int64 < 388) -> logits (B*T, 388). 2,304,388 parameters.
    """
    return _MelodyLSTM(MIDI_EVENT_VOCAB, dim=256, layers=4, dropout=0.2)


GROOVE_STEPS = 32
"""Guess: two bars of sixteenth notes per sample, as in Magenta's GrooVAE (Gillick et al., 2019),
whose Groove MIDI Dataset is the usual data for groove models; the iDAW notes name no data for
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
    """The iDAW notes' GroovePredictor as a small transformer that humanises a drum pattern.

    From the iDAW notes: the name, ``hidden_dim: 256``, ``num_layers: 4`` and ``dropout: 0.2`` (its
    memory tips, which apply to all three models), and the fact that it trains 3-5 times faster
    than the melody model (a 1-2 min against an 8-10 min epoch). Guess: GrooVAE's task (Gillick
    et al., 2019): from which of 9 drum voices hit on each of 32 sixteenth-note steps, predict
    each hit's velocity and timing offset (MSE). A pre-LN causal transformer as in
    ``melody_transformer``; the notes describe no layers.

    forward(hits: (B, 32, 9) float, target: (B, 32, 18) float) -> scalar loss.
    3,174,930 parameters.
    """
    return _GroovePredictor(GROOVE_VOICES, GROOVE_STEPS, dim=256, layers=4, heads=8)


# ---------------------------------------------------------------------------------------------
# From the MIDI notes: MIDI transformers of 100M, 350M and 760M parameters
# ---------------------------------------------------------------------------------------------

MIDI_SEQ_LEN = 1024
"""The MIDI notes: "Sequence Length: 1024-2048 tokens" for small models, 512-1024 for medium
ones."""


def midi_transformer_100m() -> nn.Module:
    """The MIDI notes' "100M parameter" MIDI model: a GPT-style decoder, 768 wide and 14 deep.

    From the MIDI notes: about 100M parameters ("Example: 100M model", "Model Weights: ~400 MB
    (fp32)") and sequences of 1024-2048 tokens. Guess: the pre-LN decoder of
    ``melody_transformer`` (12 heads, 4x MLP, learned positions up to 2048) over the
    388-event vocabulary of ``MIDI_EVENT_VOCAB``; 14 blocks of width 768 bring it to 100M. The
    seed's example, SkyTNT's midi-model, is Llama-based with its own tokenizer; its layers are
    not in the notes.

    forward(tokens: (B, T) int64 < 388) -> logits (B*T, 388). 101,400,964 parameters.
    """
    return _MelodyTransformer(
        MIDI_EVENT_VOCAB, dim=768, layers=14, heads=12, max_len=2048, dropout=0.1
    )


def midi_transformer_350m() -> nn.Module:
    """The MIDI notes' upper "Medium Models" size (100M-350M parameters): 1024 wide, 28 deep.

    Same family as ``midi_transformer_100m`` (guess), 16 heads, positions up to 2048.

    forward(tokens: (B, T) int64 < 388) -> logits (B*T, 388). 355,588,484 parameters.
    """
    return _MelodyTransformer(
        MIDI_EVENT_VOCAB, dim=1024, layers=28, heads=16, max_len=2048, dropout=0.1
    )


def midi_transformer_760m() -> nn.Module:
    """A "Large Models" size of the MIDI notes (more than 350M parameters): 1536 wide, 27 deep.

    Same family as ``midi_transformer_100m`` (guess), 16 heads; the size of GPT-2 large.

    forward(tokens: (B, T) int64 < 388) -> logits (B*T, 388). 769,292,164 parameters.
    """
    return _MelodyTransformer(
        MIDI_EVENT_VOCAB, dim=1536, layers=27, heads=16, max_len=2048, dropout=0.1
    )
