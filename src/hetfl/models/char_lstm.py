"""A character LSTM for next-character prediction (LEAF Shakespeare), batched over clients by ``torch.func``.

The model of LEAF's Shakespeare baseline (Caldas et al., "LEAF: A Benchmark for Federated Settings",
2018, ``models/shakespeare/stacked_lstm.py``) and of McMahan et al., "Communication-Efficient Learning of
Deep Networks from Decentralized Data" (AISTATS 2017), Sec. 3: an 8-dimensional character embedding, two
LSTM layers of 256 units, and a linear layer from the last step's hidden state to the 80 characters.

Inputs are what the ``leaf`` dataset gives for Shakespeare (``hetfl.data.leaf``): ``x [B, 80]``, the indices
of 80 characters in LEAF's alphabet stored as floats (cast to integers here), ``y`` the next character's
index. ``nn.LSTM`` cannot be batched over clients by ``torch.func.vmap`` (no batching rule for its fused
kernel), so each layer is the standard LSTM recurrence (Hochreiter & Schmidhuber 1997, with a forget gate;
``nn.LSTM``'s equations and gate order i, f, g, o) written with tensor operations: equal to ``nn.LSTM`` on
the same weights, outputs and gradients (``tests/test_generic_models.py``). Each step is a few fused
operations on a per-step view of the input products, which halves a training step's time against the
straightforward recurrence (``benchmarks/lstm_recurrence.py``). Initialization (``init: module``): ``nn.LSTM``'s,
U(±1/√hidden) for every LSTM weight and bias; ``nn.Embedding``'s N(0, 1); ``nn.Linear``'s.
"""

from __future__ import annotations

import dataclasses
import math

import torch
from torch import Tensor, nn

from hetfl.models.base import ModelOptions, positive
from hetfl.models.generic import ModelOptionError, ModuleModel


class LSTMLayer(nn.Module):
    """One LSTM layer over a whole sequence: ``x [B, T, in]`` -> hidden states ``[B, T, hidden]``.

    Params (``nn.LSTM``'s layout, one layer): ``weight_ih [4·hidden, in]``, ``weight_hh [4·hidden, hidden]``,
    ``bias_ih [4·hidden]``, ``bias_hh [4·hidden]``; gates i, f, g, o in that order.
    """

    def __init__(self, inputs: int, hidden: int):
        super().__init__()
        self.hidden = hidden
        self.weight_ih = nn.Parameter(torch.empty(4 * hidden, inputs))
        self.weight_hh = nn.Parameter(torch.empty(4 * hidden, hidden))
        self.bias_ih = nn.Parameter(torch.empty(4 * hidden))
        self.bias_hh = nn.Parameter(torch.empty(4 * hidden))
        bound = 1.0 / math.sqrt(hidden)
        for p in self.parameters():
            nn.init.uniform_(p, -bound, bound)

    def forward(self, x: Tensor) -> Tensor:
        hidden = self.hidden
        w_hh_t = self.weight_hh.T
        # the input products of every step at once, then one view per step (unbind: indexing gates_x[:, t]
        # instead costs its backward a zero tensor of the whole sequence per step)
        gates_x = (torch.matmul(x, self.weight_ih.T) + (self.bias_ih + self.bias_hh)).unbind(1)
        h = c = x.new_zeros(x.shape[0], hidden)
        out = []
        for step in gates_x:
            gates = torch.addmm(step, h, w_hh_t)  # [B, 4H]: i, f, g, o
            s = torch.sigmoid(gates)  # g's entries unused: one call instead of three
            g = torch.tanh(gates[:, 2 * hidden : 3 * hidden])
            c = torch.addcmul(s[:, hidden : 2 * hidden] * c, s[:, :hidden], g)
            h = s[:, 3 * hidden :] * torch.tanh(c)
            out.append(h)
        return torch.stack(out, dim=1)

    def forward_flops(self, x: Tensor, out: Tensor) -> int:
        """Multiply-add FLOPs per sample of :meth:`forward` on ``x [B, T, in]``: the input and recurrent
        products of the four gates at each of the T steps, 2·4·hidden·(in + hidden)·T (``hetfl.tools.plan``)."""
        return 2 * 4 * self.hidden * (x.shape[-1] + self.hidden) * x.shape[1]


class CharLSTMModule(nn.Module):
    """Embedding -> ``layers`` LSTM layers -> Linear on the last step: ``x [B, T]`` indices -> ``[B, K]``.

    Args:
        vocab: embedding rows (characters). embed: embedding width. hidden: LSTM units. layers: LSTM
        layers. num_classes: K.
    """

    def __init__(self, vocab: int, embed: int, hidden: int, layers: int, num_classes: int):
        super().__init__()
        self.embed = nn.Embedding(vocab, embed)
        self.lstm = nn.ModuleList(LSTMLayer(embed if i == 0 else hidden, hidden) for i in range(layers))
        self.fc = nn.Linear(hidden, num_classes)

    def forward(self, x: Tensor) -> Tensor:
        h = self.embed(x.long())  # [B, T, embed]
        for layer in self.lstm:
            h = layer(h)
        return self.fc(h[:, -1])


class CharLSTM(ModuleModel):
    """``char_lstm``: :class:`CharLSTMModule` through the generic ``torch.func`` path.

    Params: ``embed.weight [C, vocab, embed]``, ``lstm.<l>.weight_ih [C, 4·hidden, in]``,
    ``lstm.<l>.weight_hh``, ``lstm.<l>.bias_ih``, ``lstm.<l>.bias_hh`` for each layer l, ``fc.weight [C, K,
    hidden]``, ``fc.bias [C, K]``. ``split: input`` makes the embedding personal, ``output`` the classifier.

    Raises:
        ModelOptionError: the input is not a sequence ``(T,)`` of character indices, and the checks of
            ``ModuleModel``.
    """

    name = "char_lstm"

    @dataclasses.dataclass(frozen=True)
    class Options(ModelOptions):
        """The model's config options."""

        vocab: int = positive(80)
        embed: int = positive(8)
        hidden: int = positive(256)
        layers: int = positive(2)

    def __init__(
        self,
        sample_shape,
        num_classes,
        vocab: int = 80,
        embed: int = 8,
        hidden: int = 256,
        layers: int = 2,
        **rest,
    ):
        if len(tuple(sample_shape)) != 1:
            raise ModelOptionError(
                "name", f"model 'char_lstm' needs sequences of character indices (T,), got {sample_shape}"
            )
        self.vocab, self.embed, self.hidden, self.num_layers = (
            int(vocab),
            int(embed),
            int(hidden),
            int(layers),
        )
        super().__init__(sample_shape, num_classes, **rest)

    def build_module(self) -> nn.Module:
        return CharLSTMModule(self.vocab, self.embed, self.hidden, self.num_layers, self.num_classes)

    def sample_cost(self) -> int:
        """The hidden states of every step of one layer (what the recurrence keeps), per sample."""
        return max(super().sample_cost(), self.sample_shape[0] * 4 * self.hidden)


MODELS = [CharLSTM]
