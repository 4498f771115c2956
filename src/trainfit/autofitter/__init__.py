"""autofit: the settings of a plain PyTorch training loop that fit the device, from the
estimate of the live model, applied to it (see docs/autofit.md).

    autofit(model, sample, effective_batch, ...) -> Fit
        core.py     choosing: validate, plan the live model's meta copy, check the split
        apply.py    what is done to the model: freeze, checkpointing, dtype, device; optimizers
        confirm.py  the optional real step on the model itself, undone afterwards
        fit.py      Fit (autocast, scaler, split, make_optimizer, replan, summary), Confirmed
"""

from __future__ import annotations

from trainfit.autofitter.core import autofit
from trainfit.autofitter.fit import Confirmed, Fit

__all__ = ["Confirmed", "Fit", "autofit"]
