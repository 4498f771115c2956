"""A ReDimNet-b2-like speaker-embedding CNN of the catalogue (sources and guesses in
`trainfit.models.zoo`)."""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

# ---------------------------------------------------------------------------------------------
# From the speaker notes: ReDimNet-b2-like speaker embedding
# ---------------------------------------------------------------------------------------------

VOXCELEB2_SPEAKERS = 5994
"""The speaker notes: VoxCeleb2 has 5,994 training speakers (``AAMSoftmax(256, 5994)``)."""


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
        # NB: a plain bias-free linear stands in for the notes' AAM-softmax weight (256 x 5994).
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
    """The speaker notes' ReDimNet-b2 model: a 4.8M-parameter embedding net plus a speaker head.

    From the speaker notes: mel input 72 x 300 (``F: 72``; 48,000 samples at 16 kHz), ``C: 12``, 6
    backbone stages, ``out_channels: 512``, pooled features ``[B, 1024]`` (mean and std of 512
    channels), a projection head to ``embed_dim: 256`` (the notes' "MRL projection"), and a
    256 x 5994 speaker classifier. The embedding network (everything but ``head``) has 4,803,572
    parameters: 2.2% over the notes' "4.7M" for ReDimNet-b2 and 0.2% under its "Model
    parameters: 4,812,000" with the projection. The notes count the 1,534,464-weight
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
