"""The recurrent language models of the faithful cases, importable by trainfit (`pkg.module:fn`).

Embedding -> cuDNN RNN -> vocabulary logits -> next-token cross-entropy: forward takes the token
ids and returns the loss, the shape of a melody or character language model.
"""

from __future__ import annotations

import torch
from torch import nn

VOCAB = 388
EMBED = 256
HIDDEN = 512


class RnnLM(nn.Module):
    """One `nn.GRU`, `nn.LSTM` or `nn.RNN` (tanh or relu) between an embedding and a head."""

    def __init__(
        self,
        mode: str,
        layers: int,
        dropout: float = 0.0,
        bi: bool = False,
        proj: int = 0,
        hidden: int = HIDDEN,
        embed: int = EMBED,
    ) -> None:
        super().__init__()
        self.embed = nn.Embedding(VOCAB, embed)
        common = dict(num_layers=layers, dropout=dropout, bidirectional=bi, batch_first=True)
        if mode == "GRU":
            self.rnn: nn.Module = nn.GRU(embed, hidden, **common)
        elif mode == "LSTM":
            self.rnn = nn.LSTM(embed, hidden, proj_size=proj, **common)
        else:
            act = {"RNN_TANH": "tanh", "RNN_RELU": "relu"}[mode]
            self.rnn = nn.RNN(embed, hidden, nonlinearity=act, **common)
        self.head = nn.Linear((proj or hidden) * (2 if bi else 1), VOCAB)

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        out, _ = self.rnn(self.embed(tokens))
        logits = self.head(out)
        return nn.functional.cross_entropy(
            logits[:, :-1].reshape(-1, VOCAB), tokens[:, 1:].reshape(-1)
        )


def gru_2l_drop() -> nn.Module:
    return RnnLM("GRU", 2, dropout=0.2)


def rnn_tanh_2l() -> nn.Module:
    return RnnLM("RNN_TANH", 2)


def rnn_relu_2l() -> nn.Module:
    return RnnLM("RNN_RELU", 2)


def lstm_bi_2l() -> nn.Module:
    return RnnLM("LSTM", 2, bi=True)


def lstm_proj_2l() -> nn.Module:
    return RnnLM("LSTM", 2, proj=128)


def gru_bi_1l() -> nn.Module:
    return RnnLM("GRU", 1, bi=True)


# Held-out cases of the cuDNN RNN rules (`measure_gpu.HELDOUT_RNN`): shapes unlike the faithful
# cases above and the probe grid (`benchmarks/accuracy/probe_cudnn.py`), predicted before any run.


def heldout_gru_3l_drop() -> nn.Module:
    return RnnLM("GRU", 3, dropout=0.25, hidden=384)


def heldout_rnn_relu_bi() -> nn.Module:
    return RnnLM("RNN_RELU", 2, bi=True, hidden=768)


def heldout_lstm_proj256() -> nn.Module:
    return RnnLM("LSTM", 2, proj=256, hidden=1024)


def heldout_gru_char() -> nn.Module:
    return RnnLM("GRU", 1, hidden=1024, embed=128)


def heldout_rnn_tanh_4l_drop() -> nn.Module:
    return RnnLM("RNN_TANH", 4, dropout=0.1, hidden=256)


def heldout_gru_bi_2l_drop() -> nn.Module:
    return RnnLM("GRU", 2, dropout=0.3, bi=True, hidden=320, embed=192)
