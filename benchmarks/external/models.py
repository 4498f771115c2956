"""Exact re-implementations of the models that the public corpus (corpus.yaml) measured.

Each factory takes no argument (trainfit calls `factory()`), and `DEFAULT_INPUTS` gives the
input tensors of the measured runs, so a row's `trainfit_model` is e.g.
`benchmarks.external.models:vgg16_bn_c10` with the inputs listed in the row.

Plain torch (torchvision is not installed here): layer shapes and parameter counts match the
sources; `python -m benchmarks.external.models` prints the counts checked below.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from trainfit.models.zoo import resnet50

# ---------------------------------------------------------------------------------------------
# torchvision VGG-16 with batch norm (rasbt/machine-learning-notes, vgg16-cifar10.py)
# ---------------------------------------------------------------------------------------------

_VGG16_CFG = (
    64,
    64,
    "M",
    128,
    128,
    "M",
    256,
    256,
    256,
    "M",
    512,
    512,
    512,
    "M",
    512,
    512,
    512,
    "M",
)


class _VGG(nn.Module):
    """torchvision's VGG: `features`, AdaptiveAvgPool2d(7) and a 3-layer classifier."""

    def __init__(self, num_classes: int, batch_norm: bool) -> None:
        super().__init__()
        layers: list[nn.Module] = []
        c_in = 3
        for v in _VGG16_CFG:
            if v == "M":
                layers.append(nn.MaxPool2d(2, 2))
                continue
            layers.append(nn.Conv2d(c_in, int(v), 3, padding=1))
            if batch_norm:
                layers.append(nn.BatchNorm2d(int(v)))
            layers.append(nn.ReLU(inplace=True))
            c_in = int(v)
        self.features = nn.Sequential(*layers)
        self.avgpool = nn.AdaptiveAvgPool2d((7, 7))
        self.classifier = nn.Sequential(
            nn.Linear(512 * 7 * 7, 4096),
            nn.ReLU(True),
            nn.Dropout(0.5),
            nn.Linear(4096, 4096),
            nn.ReLU(True),
            nn.Dropout(0.5),
            nn.Linear(4096, num_classes),
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """x (B, 3, H, W) -> logits (B, num_classes)."""
        x = self.avgpool(self.features(x))
        return self.classifier(torch.flatten(x, 1))


def vgg16_bn_c10() -> nn.Module:
    """torchvision `vgg16_bn` (hub pytorch/vision:v0.11.0) with its last layer 4096 -> 10.

    torchvision publishes 138,365,992 parameters for 1000 classes; with 10 classes that is
    138,365,992 - 990 * 4097 = 134,309,962 (checked by `_check`).
    """
    return _VGG(10, batch_norm=True)


def vgg16() -> nn.Module:
    """torchvision `vgg16` (no batch norm, 1000 classes): 138,357,544 parameters (torchvision).

    timm's `vgg16` computes the same layers with its classifier written as a 7x7 and a 1x1
    convolution on the 7x7 feature map (ConvMlp): the same parameters and FLOPs at 224x224.
    """
    return _VGG(1000, batch_norm=False)


# ---------------------------------------------------------------------------------------------
# torchvision ResNet-50 with another head (mrdbourke/mac-ml-speed-test)
# ---------------------------------------------------------------------------------------------


def resnet50_c100() -> nn.Module:
    """torchvision `resnet50(num_classes=100)` (trainfit's zoo ResNet-50, v1.5), 32x32 input."""
    return resnet50(num_classes=100)


def resnet50_c101() -> nn.Module:
    """torchvision `resnet50(num_classes=101)` (trainfit's zoo ResNet-50, v1.5), 224x224."""
    return resnet50(num_classes=101)


# ---------------------------------------------------------------------------------------------
# CIFAR ResNets of He et al. with option-A shortcuts (akamaster/pytorch_resnet_cifar10, as
# copied into SarthakYadav/mlx-examples cifar/resnet_pytorch.py)
# ---------------------------------------------------------------------------------------------


class _PadShortcut(nn.Module):
    """Option A: subsample by 2 and zero-pad the channels (no parameters)."""

    def __init__(self, planes: int) -> None:
        super().__init__()
        self.pad = planes // 4

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """(B, C, H, W) -> (B, C + 2 * pad, H/2, W/2)."""
        return F.pad(x[:, :, ::2, ::2], (0, 0, 0, 0, self.pad, self.pad))


class _BasicBlock(nn.Module):
    def __init__(self, c_in: int, planes: int, stride: int) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(c_in, planes, 3, stride, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(planes)
        self.conv2 = nn.Conv2d(planes, planes, 3, 1, 1, bias=False)
        self.bn2 = nn.BatchNorm2d(planes)
        self.shortcut: nn.Module = nn.Identity()
        if stride != 1 or c_in != planes:
            self.shortcut = _PadShortcut(planes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """(B, C_in, H, W) -> (B, planes, H/stride, W/stride)."""
        out = F.relu(self.bn1(self.conv1(x)))
        out = self.bn2(self.conv2(out))
        return F.relu(out + self.shortcut(x))


class _CifarResNet(nn.Module):
    def __init__(self, n: int, num_classes: int = 10) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(3, 16, 3, 1, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(16)
        blocks: list[nn.Module] = []
        c_in = 16
        for i, planes in enumerate((16, 32, 64)):
            for j in range(n):
                blocks.append(_BasicBlock(c_in, planes, 2 if (i > 0 and j == 0) else 1))
                c_in = planes
        self.layers = nn.Sequential(*blocks)
        self.linear = nn.Linear(64, num_classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """x (B, 3, 32, 32) -> logits (B, 10)."""
        out = self.layers(F.relu(self.bn1(self.conv1(x))))
        out = F.avg_pool2d(out, out.size()[3])
        return self.linear(out.flatten(1))


def resnet20_cifar() -> nn.Module:
    """ResNet-20 for CIFAR-10 (3 blocks per stage); the source file states 0.27M parameters."""
    return _CifarResNet(3)


def resnet44_cifar() -> nn.Module:
    """ResNet-44 for CIFAR-10 (7 blocks per stage); the source file states 0.66M parameters."""
    return _CifarResNet(7)


def resnet110_cifar() -> nn.Module:
    """ResNet-110 for CIFAR-10 (18 blocks per stage); the source file states 1.7M parameters."""
    return _CifarResNet(18)


# ---------------------------------------------------------------------------------------------
# Hugging Face BERT heads built from explicit configs (no hub access), eager attention as the
# transformers versions of the measured runs used
# ---------------------------------------------------------------------------------------------

_BERT_BASE = {
    "hidden_size": 768,
    "num_hidden_layers": 12,
    "num_attention_heads": 12,
    "intermediate_size": 3072,
}
_BERT_LARGE = {
    "hidden_size": 1024,
    "num_hidden_layers": 24,
    "num_attention_heads": 16,
    "intermediate_size": 4096,
}


def _bert(cls_name: str, size: dict[str, int], vocab: int, **extra: int) -> nn.Module:
    import transformers

    config = transformers.BertConfig(
        vocab_size=vocab, max_position_embeddings=512, type_vocab_size=2, **size, **extra
    )
    config._attn_implementation = "eager"
    return getattr(transformers, cls_name)(config)


def bert_large_uncased_squad_nvidia() -> nn.Module:
    """NVIDIA DeepLearningExamples BERT-large SQuAD fine-tuning (run_squad.py).

    bert-large-uncased shapes with the vocabulary padded to a multiple of 8 (30522 -> 30528),
    as run_squad.py does; a span head (2 outputs). NVIDIA's fused bias-GeLU/LayerNorm kernels
    change speed, not shapes. NVIDIA's BertModel also builds a pooler (1024x1024 + 1024) that
    the span head never uses (no gradient); Hugging Face's QA model omits it.
    """
    return _bert("BertForQuestionAnswering", _BERT_LARGE, 30528)


def bert_base_uncased_squad_nvidia() -> nn.Module:
    """As `bert_large_uncased_squad_nvidia` with bert-base-uncased shapes."""
    return _bert("BertForQuestionAnswering", _BERT_BASE, 30528)


def bert_base_cased_seqcls() -> nn.Module:
    """`AutoModelForSequenceClassification('bert-base-cased')`: vocab 28996, 2 labels.

    lucadiliello/pytorch-apple-silicon-benchmarks tests/transformers_sequence_classification.py.
    """
    return _bert("BertForSequenceClassification", _BERT_BASE, 28996, num_labels=2)


def _squad_inputs(seq: int) -> tuple[str, ...]:
    return (
        f"input_ids=B,{seq}:int64<30522",
        f"token_type_ids=B,{seq}:int64<2",
        f"attention_mask=B,{seq}:int64<2",
        f"start_positions=B:int64<{seq}",
        f"end_positions=B:int64<{seq}",
    )


DEFAULT_INPUTS: dict[str, tuple[str, ...]] = {
    "vgg16_bn_c10": ("x=B,3,224,224:float32",),
    "vgg16": ("x=B,3,224,224:float32",),
    "resnet50_c100": ("x=B,3,32,32:float32",),
    "resnet50_c101": ("x=B,3,224,224:float32",),
    "resnet20_cifar": ("x=B,3,32,32:float32",),
    "resnet44_cifar": ("x=B,3,32,32:float32",),
    "resnet110_cifar": ("x=B,3,32,32:float32",),
    "bert_large_uncased_squad_nvidia": _squad_inputs(384),
    "bert_base_uncased_squad_nvidia": _squad_inputs(384),
    "bert_base_cased_seqcls": (
        "input_ids=B,128:int64<28996",
        "attention_mask=B,128:int64<2",
        "labels=B:int64<2",
    ),
}
"""Inputs of the measured runs; rows whose shapes differ list their own `inputs`."""

PARAMETERS: dict[str, int] = {
    "vgg16_bn_c10": 134_309_962,
    "vgg16": 138_357_544,
    "resnet50_c100": 23_712_932,
    "resnet50_c101": 23_714_981,
    "resnet20_cifar": 269_722,
    "resnet44_cifar": 658_586,
    "resnet110_cifar": 1_727_962,
    "bert_large_uncased_squad_nvidia": 334_100_482,
    "bert_base_uncased_squad_nvidia": 108_897_794,
    "bert_base_cased_seqcls": 108_311_810,
}
"""Parameter counts: vgg16_bn from torchvision's published 138,365,992 (1000 classes) less the
head difference; vgg16 is torchvision's published count; resnet50 from torchvision's 25,557,032
less the head difference; the CIFAR ResNets round to the 0.27M / 0.66M / 1.7M the source file
states; the BERT counts follow from the configs (bert-base-cased with a 2-label head is the
108,311,810 Hugging Face reports)."""


def _check() -> None:
    """Build each factory on the meta device and compare its parameter count."""
    for name, expected in PARAMETERS.items():
        with torch.device("meta"):
            model = globals()[name]()
        got = sum(p.numel() for p in model.parameters())
        status = "ok" if got == expected else f"MISMATCH (expected {expected:,})"
        print(f"{name:36s} {got:>13,}  {status}")


if __name__ == "__main__":
    _check()
