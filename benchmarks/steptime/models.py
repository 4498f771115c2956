"""The held-out step-time cases' own models, built in code (no torchvision), importable by
trainfit (`benchmarks.steptime.models:NAME`) and by the GPU harness alike."""

from __future__ import annotations

import itertools

import torch
from torch import nn

from benchmarks.faithful.models import RnnLM


class MLP(nn.Module):
    """Linear layers with ReLU between them, then a classifier."""

    def __init__(self, widths: tuple[int, ...], classes: int) -> None:
        super().__init__()
        layers: list[nn.Module] = []
        for a, b in itertools.pairwise(widths):
            layers += [nn.Linear(a, b), nn.ReLU()]
        layers.append(nn.Linear(widths[-1], classes))
        self.net = nn.Sequential(*layers)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.net(x)


def _mlp(widths: tuple[int, ...], classes: int) -> nn.Module:
    return MLP(widths, classes)


def mlp_4x512() -> nn.Module:
    """256 -> 4 x 512 (ReLU) -> 10 classes."""
    return _mlp((256, 512, 512, 512, 512), 10)


def mlp_8x256() -> nn.Module:
    """A deep narrow MLP: 64 -> 8 x 256 (ReLU) -> 10 classes."""
    return _mlp((64, *([256] * 8)), 10)


class _Basic(nn.Module):
    def __init__(self, cin: int, cout: int, stride: int) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(cin, cout, 3, stride, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(cout)
        self.conv2 = nn.Conv2d(cout, cout, 3, 1, 1, bias=False)
        self.bn2 = nn.BatchNorm2d(cout)
        self.relu = nn.ReLU(inplace=True)
        self.down: nn.Module | None = None
        if stride != 1 or cin != cout:
            self.down = nn.Sequential(
                nn.Conv2d(cin, cout, 1, stride, bias=False), nn.BatchNorm2d(cout)
            )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out = self.relu(self.bn1(self.conv1(x)))
        out = self.bn2(self.conv2(out))
        skip = x if self.down is None else self.down(x)
        return self.relu(out + skip)


class ResNet18(nn.Module):
    """ResNet-18 as torchvision builds it (blocks [2, 2, 2, 2]), written out here."""

    def __init__(self, classes: int = 1000) -> None:
        super().__init__()
        self.stem = nn.Sequential(
            nn.Conv2d(3, 64, 7, 2, 3, bias=False),
            nn.BatchNorm2d(64),
            nn.ReLU(inplace=True),
            nn.MaxPool2d(3, 2, 1),
        )
        blocks: list[nn.Module] = []
        cin = 64
        for cout, stride in ((64, 1), (128, 2), (256, 2), (512, 2)):
            blocks += [_Basic(cin, cout, stride), _Basic(cout, cout, 1)]
            cin = cout
        self.blocks = nn.Sequential(*blocks)
        self.fc = nn.Linear(512, classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.blocks(self.stem(x))
        return self.fc(torch.flatten(nn.functional.adaptive_avg_pool2d(x, 1), 1))


def resnet18() -> nn.Module:
    return ResNet18()


def lstm_h128_1l() -> nn.Module:
    """A one-layer LSTM language model at hidden 128 (cuDNN's persistent kernel)."""
    return RnnLM("LSTM", 1, hidden=128, embed=128)


def gru_h128_2l() -> nn.Module:
    """A two-layer GRU at hidden 128: 3 x 128 x 128 recurrent weights, under the persistent
    kernel's size by the rule."""
    return RnnLM("GRU", 2, hidden=128, embed=128)


def rnn_tanh_h384_2l() -> nn.Module:
    """A two-layer RNN_TANH at hidden 384: 384 x 384 recurrent weights, over the persistent
    kernel's size by the rule."""
    return RnnLM("RNN_TANH", 2, hidden=384, embed=128)


def mlp_3x2048() -> nn.Module:
    """A wide MLP: 512 -> 3 x 2048 (ReLU) -> 100 classes."""
    return _mlp((512, 2048, 2048, 2048), 100)


def mlp_12x128() -> nn.Module:
    """A very deep narrow MLP: 32 -> 12 x 128 (ReLU) -> 10 classes."""
    return _mlp((32, *([128] * 12)), 10)


def lstm_h192_2l() -> nn.Module:
    """A two-layer LSTM at hidden 192: 4 x 192 x 192 recurrent weights, between the persistent
    kernel's size and the stepped kernels' calibrated one."""
    return RnnLM("LSTM", 2, hidden=192, embed=128)


def gru_h256_1l() -> nn.Module:
    """A one-layer GRU at hidden 256: 3 x 256 x 256 recurrent weights."""
    return RnnLM("GRU", 1, hidden=256, embed=128)


def rnn_relu_h128_bi_2l() -> nn.Module:
    """A bidirectional two-layer RNN_RELU at hidden 128."""
    return RnnLM("RNN_RELU", 2, hidden=128, embed=64, bi=True)


class SmallCNN(nn.Module):
    """A CIFAR-sized net: four 3x3 convolutions with BatchNorm and ReLU, two max-pools, a
    global average pool and a classifier."""

    def __init__(self, classes: int = 10) -> None:
        super().__init__()
        layers: list[nn.Module] = []
        for i, (cin, cout) in enumerate(((3, 64), (64, 128), (128, 256), (256, 256))):
            layers += [nn.Conv2d(cin, cout, 3, 1, 1, bias=False), nn.BatchNorm2d(cout), nn.ReLU()]
            if i in (1, 2):
                layers.append(nn.MaxPool2d(2))
        self.features = nn.Sequential(*layers)
        self.fc = nn.Linear(256, classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.features(x)
        return self.fc(torch.flatten(nn.functional.adaptive_avg_pool2d(x, 1), 1))


def small_cnn() -> nn.Module:
    return SmallCNN()


class Encoder(nn.Module):
    """`nn.TransformerEncoder` (post-norm, GELU) over feature vectors, mean-pooled, then a
    classifier."""

    def __init__(self, width: int, layers: int, heads: int, classes: int) -> None:
        super().__init__()
        layer = nn.TransformerEncoderLayer(
            width, heads, 4 * width, dropout=0.1, activation="gelu", batch_first=True
        )
        self.encoder = nn.TransformerEncoder(layer, layers, enable_nested_tensor=False)
        self.head = nn.Linear(width, classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(self.encoder(x).mean(1))


def encoder_d256_4l() -> nn.Module:
    """Four encoder layers at width 256, 8 heads, 20 classes."""
    return Encoder(256, 4, 8, 20)


# The second blind set's models (`blind2_cases.py`).


def mlp_6x512() -> nn.Module:
    """128 -> 6 x 512 (ReLU) -> 10 classes."""
    return _mlp((128, *([512] * 6)), 10)


def mlp_16x64() -> nn.Module:
    """A 16-layer MLP at width 64: 16 -> 16 x 64 (ReLU) -> 4 classes."""
    return _mlp((16, *([64] * 16)), 4)


def mlp_2x1024() -> nn.Module:
    """256 -> 2 x 1024 (ReLU) -> 50 classes."""
    return _mlp((256, 1024, 1024), 50)


def mlp_10x192() -> nn.Module:
    """48 -> 10 x 192 (ReLU) -> 10 classes."""
    return _mlp((48, *([192] * 10)), 10)


def gru_h192_2l() -> nn.Module:
    """A two-layer GRU at hidden 192."""
    return RnnLM("GRU", 2, hidden=192, embed=96)


def lstm_h320_1l() -> nn.Module:
    """A one-layer LSTM at hidden 320."""
    return RnnLM("LSTM", 1, hidden=320, embed=128)


def rnn_tanh_h128_1l() -> nn.Module:
    """A one-layer RNN_TANH at hidden 128."""
    return RnnLM("RNN_TANH", 1, hidden=128, embed=64)


def gru_h512_1l() -> nn.Module:
    """A one-layer GRU at hidden 512 (run under bf16 autocast)."""
    return RnnLM("GRU", 1, hidden=512, embed=256)


def lstm_h96_bi_1l() -> nn.Module:
    """A bidirectional one-layer LSTM at hidden 96."""
    return RnnLM("LSTM", 1, hidden=96, embed=64, bi=True)


class TinyCNN(nn.Module):
    """A LeNet-sized net for 28 x 28 grey images: two 5x5 convolutions with ReLU and
    max-pools, two linear layers."""

    def __init__(self, classes: int = 10) -> None:
        super().__init__()
        self.features = nn.Sequential(
            nn.Conv2d(1, 32, 5, padding=2),
            nn.ReLU(),
            nn.MaxPool2d(2),
            nn.Conv2d(32, 64, 5, padding=2),
            nn.ReLU(),
            nn.MaxPool2d(2),
        )
        self.fc1 = nn.Linear(64 * 7 * 7, 256)
        self.fc2 = nn.Linear(256, classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = torch.flatten(self.features(x), 1)
        return self.fc2(nn.functional.relu(self.fc1(x)))


def tiny_cnn() -> nn.Module:
    return TinyCNN()


def encoder_d512_6l() -> nn.Module:
    """Six encoder layers at width 512, 8 heads, 5 classes."""
    return Encoder(512, 6, 8, 5)


# The third blind set's models (`blind3_cases.py`): multi-layer and bidirectional cuDNN RNNs.


def gru_h256_3l() -> nn.Module:
    """Embedding 128 -> 3-layer GRU, hidden 256 -> vocabulary."""
    return RnnLM("GRU", 3, hidden=256, embed=128)


def lstm_h384_2l() -> nn.Module:
    """Embedding 192 -> 2-layer LSTM, hidden 384 -> vocabulary."""
    return RnnLM("LSTM", 2, hidden=384, embed=192)


def gru_h128_bi_2l() -> nn.Module:
    """Embedding 96 -> 2-layer bidirectional GRU, hidden 128 -> vocabulary."""
    return RnnLM("GRU", 2, hidden=128, embed=96, bi=True)


def rnn_tanh_h256_3l() -> nn.Module:
    """Embedding 128 -> 3-layer RNN_TANH, hidden 256 -> vocabulary."""
    return RnnLM("RNN_TANH", 3, hidden=256, embed=128)


def lstm_h128_4l() -> nn.Module:
    """Embedding 64 -> 4-layer LSTM, hidden 128 -> vocabulary."""
    return RnnLM("LSTM", 4, hidden=128, embed=64)


def gru_h768_2l() -> nn.Module:
    """Embedding 256 -> 2-layer GRU, hidden 768 -> vocabulary."""
    return RnnLM("GRU", 2, hidden=768, embed=256)


# The fourth blind set's models (`blind4_cases.py`).


def mlp_3x96() -> nn.Module:
    """A small MLP: 24 -> 3 x 96 (ReLU) -> 10 classes."""
    return _mlp((24, 96, 96, 96), 10)


def mlp_20x128() -> nn.Module:
    """A deep MLP: 32 -> 20 x 128 (ReLU) -> 10 classes."""
    return _mlp((32, *([128] * 20)), 10)


def mlp_6x256() -> nn.Module:
    """64 -> 6 x 256 (ReLU) -> 10 classes (run under bf16 autocast)."""
    return _mlp((64, *([256] * 6)), 10)


def mlp_4x256() -> nn.Module:
    """64 -> 4 x 256 (ReLU) -> 10 classes (run with gradient accumulation)."""
    return _mlp((64, *([256] * 4)), 10)


class BnCNN(nn.Module):
    """A small CIFAR-sized CNN: three 3x3 convolutions (16, 32, 64 channels) each with
    BatchNorm, ReLU and a 2x2 max-pool, global average pooling, a linear classifier."""

    def __init__(self, classes: int = 10) -> None:
        super().__init__()
        layers: list[nn.Module] = []
        for cin, cout in ((3, 16), (16, 32), (32, 64)):
            layers += [
                nn.Conv2d(cin, cout, 3, padding=1, bias=False),
                nn.BatchNorm2d(cout),
                nn.ReLU(),
                nn.MaxPool2d(2),
            ]
        self.features = nn.Sequential(*layers)
        self.fc = nn.Linear(64, classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc(torch.flatten(nn.functional.adaptive_avg_pool2d(self.features(x), 1), 1))


def bn_cnn() -> nn.Module:
    return BnCNN()


def gru_h256_2l() -> nn.Module:
    """Embedding 128 -> 2-layer GRU, hidden 256 -> vocabulary."""
    return RnnLM("GRU", 2, hidden=256, embed=128)


def lstm_h192_3l() -> nn.Module:
    """Embedding 96 -> 3-layer LSTM, hidden 192 -> vocabulary (run under bf16 autocast)."""
    return RnnLM("LSTM", 3, hidden=192, embed=96)


# The sixth blind set's models (`blind6_cases.py`).


def mlp_5x320() -> nn.Module:
    """40 -> 5 x 320 (ReLU) -> 10 classes."""
    return _mlp((40, *([320] * 5)), 10)


def mlp_14x96() -> nn.Module:
    """A deep narrow MLP: 16 -> 14 x 96 (ReLU) -> 10 classes."""
    return _mlp((16, *([96] * 14)), 10)


def mlp_8x160() -> nn.Module:
    """48 -> 8 x 160 (ReLU) -> 10 classes (run under bf16 autocast)."""
    return _mlp((48, *([160] * 8)), 10)


def gru_h224_2l() -> nn.Module:
    """Embedding 112 -> 2-layer GRU, hidden 224 -> vocabulary."""
    return RnnLM("GRU", 2, hidden=224, embed=112)


def lstm_h160_2l() -> nn.Module:
    """Embedding 80 -> 2-layer LSTM, hidden 160 -> vocabulary."""
    return RnnLM("LSTM", 2, hidden=160, embed=80)


def gru_h96_3l() -> nn.Module:
    """Embedding 64 -> 3-layer GRU, hidden 96 -> vocabulary (the persistent kernel's size)."""
    return RnnLM("GRU", 3, hidden=96, embed=64)


def gru_h160_bi_1l() -> nn.Module:
    """Embedding 80 -> bidirectional 1-layer GRU, hidden 160 -> vocabulary."""
    return RnnLM("GRU", 1, hidden=160, embed=80, bi=True)


# The seventh blind set's models (`blind7_cases.py`).


def mlp_7x224() -> nn.Module:
    """56 -> 7 x 224 (ReLU) -> 10 classes."""
    return _mlp((56, *([224] * 7)), 10)


def lstm_h176_1l() -> nn.Module:
    """Embedding 88 -> 1-layer LSTM, hidden 176 -> vocabulary."""
    return RnnLM("LSTM", 1, hidden=176, embed=88)


def lstm_h240_2l() -> nn.Module:
    """Embedding 120 -> 2-layer LSTM, hidden 240 -> vocabulary."""
    return RnnLM("LSTM", 2, hidden=240, embed=120)


def gru_h144_2l() -> nn.Module:
    """Embedding 72 -> 2-layer GRU, hidden 144 -> vocabulary."""
    return RnnLM("GRU", 2, hidden=144, embed=72)


def rnn_tanh_h320_2l() -> nn.Module:
    """Embedding 160 -> 2-layer RNN_TANH, hidden 320 -> vocabulary."""
    return RnnLM("RNN_TANH", 2, hidden=320, embed=160)


def lstm_h112_3l() -> nn.Module:
    """Embedding 56 -> 3-layer LSTM, hidden 112 -> vocabulary (the persistent kernel's size)."""
    return RnnLM("LSTM", 3, hidden=112, embed=56)


def gru_h208_1l() -> nn.Module:
    """Embedding 104 -> 1-layer GRU, hidden 208 -> vocabulary."""
    return RnnLM("GRU", 1, hidden=208, embed=104)


def lstm_h144_bi_1l() -> nn.Module:
    """Embedding 72 -> bidirectional 1-layer LSTM, hidden 144 -> vocabulary."""
    return RnnLM("LSTM", 1, hidden=144, embed=72, bi=True)


def gru_h320_2l() -> nn.Module:
    """Embedding 160 -> 2-layer GRU, hidden 320 -> vocabulary (run under bf16 autocast)."""
    return RnnLM("GRU", 2, hidden=320, embed=160)
