"""A VQ patch autoencoder of the catalogue; its forward returns the training loss (sources and
guesses in `trainfit.models.zoo`)."""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

# ---------------------------------------------------------------------------------------------
# From the VQ notes: VQ patch autoencoder
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
    """The VQ notes' VQ patch autoencoder; forward returns the scalar training loss.

    From the VQ notes, exactly: encoder 1x64x64 -> 32x32x32 -> 64x16x16 -> 96x8x8 -> 64x8x8 latent,
    decoder 64x8x8 -> 96x16x16 -> 64x32x32 -> 32x64x64 -> 1x64x64, a quantiser with no extra
    activations, and a step batch of batch_size x n_patches patches.

    Guess: 4x4 stride-2 (transposed) convs with BatchNorm + ReLU, 3x3 convs into and out of the
    latent, a 512 x 64 codebook, commitment weight 0.25, MSE reconstruction. 450,529 parameters:
    fewer than the notes' "few million", which includes heads the notes do not describe.

    forward(x: (B*n_patches, 1, 64, 64) float) -> scalar loss.
    """
    return _VQPatchAutoencoder(num_codes=512, beta=0.25)
