"""The char-LSTM's recurrence as written against the straightforward one: a training step's time.

``char_lstm`` (LEAF Shakespeare) writes each LSTM layer as tensor operations so that ``vmap`` batches it
over clients (``hetfl.models.char_lstm``), and autograd differentiates it. How the step is written decides
the time: the straightforward recurrence indexes the input products ``gates_x[:, t]`` at each step, whose
backward writes a zero tensor of the whole sequence per step, and calls ``sigmoid`` three times on chunks;
``LSTMLayer`` takes one view per step (``unbind``), one ``addmm``, one ``sigmoid`` over the four gates and
``addcmul``. This times one ``loss_grads`` call (every client's forward and backward on a minibatch, the
engine's training step) both ways, on the same parameters and minibatch, one torch thread:

    python benchmarks/lstm_recurrence.py                      # ffgg_shakespeare's model: 10 clients x 16 windows
    python benchmarks/lstm_recurrence.py --clients 30 --hidden 256 --layers 2

The two alternate in blocks (``--blocks`` of ``--calls`` calls each); a time is the best block's, so that
other jobs on a shared machine slow both alike. Prints milliseconds per call of each, the ratio
straightforward / as written, and the largest relative difference between their gradients (float32
rounding). A benchmark, not a test: the numbers depend on the machine.
"""

from __future__ import annotations

import argparse
import time

import torch
from torch import Tensor

from hetfl.models.char_lstm import CharLSTM, LSTMLayer


def straightforward(self: LSTMLayer, x: Tensor) -> Tensor:
    """The textbook recurrence: index the step's input products, chunk the gates, a sigmoid each."""
    gates_x = torch.matmul(x, self.weight_ih.T) + (self.bias_ih + self.bias_hh)  # [B, T, 4H]
    h = x.new_zeros(x.shape[0], self.hidden)
    c = x.new_zeros(x.shape[0], self.hidden)
    out = []
    for t in range(x.shape[1]):
        i, f, g, o = (gates_x[:, t] + torch.matmul(h, self.weight_hh.T)).chunk(4, dim=1)
        c = torch.sigmoid(f) * c + torch.sigmoid(i) * torch.tanh(g)
        h = torch.sigmoid(o) * torch.tanh(c)
        out.append(h)
    return torch.stack(out, dim=1)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--clients", type=int, default=10)
    parser.add_argument("--batch", type=int, default=16)
    parser.add_argument("--seq", type=int, default=80)
    parser.add_argument("--embed", type=int, default=8)
    parser.add_argument("--hidden", type=int, default=64)
    parser.add_argument("--layers", type=int, default=1)
    parser.add_argument("--calls", type=int, default=5)
    parser.add_argument("--blocks", type=int, default=3)
    args = parser.parse_args()
    torch.set_num_threads(1)
    model = CharLSTM((args.seq,), 80, embed=args.embed, hidden=args.hidden, layers=args.layers)
    params = model.init(torch.Generator().manual_seed(0), count=args.clients)
    gen = torch.Generator().manual_seed(1)
    x = torch.randint(0, 80, (args.clients, args.batch, args.seq), generator=gen).float()
    y = torch.randint(0, 80, (args.clients, args.batch), generator=gen)
    ways = {"as written": LSTMLayer.forward, "straightforward": straightforward}
    best = dict.fromkeys(ways, float("inf"))
    grads = {}
    try:
        for _ in range(args.blocks):
            for name, forward in ways.items():
                LSTMLayer.forward = forward
                grads[name] = model.loss_grads(params, x, y, None)[1]  # warm-up, and the gradients compared
                start = time.perf_counter()
                for _ in range(args.calls):
                    model.loss_grads(params, x, y, None)
                best[name] = min(best[name], (time.perf_counter() - start) / args.calls)
    finally:
        LSTMLayer.forward = ways["as written"]
    mine, theirs = grads["as written"], grads["straightforward"]
    diff = max(float((mine[k] - theirs[k]).abs().max() / theirs[k].abs().max()) for k in mine)
    shape = f"{args.clients} clients x {args.batch} x {args.seq} characters, embed {args.embed}, hidden {args.hidden}"
    print(f"char_lstm loss_grads, {shape}, {args.layers} layer(s), 1 thread (best of {args.blocks} blocks)")
    for name, seconds in best.items():
        print(f"  {name:16s} {seconds * 1e3:8.1f} ms per call")
    print(f"  straightforward / as written: {best['straightforward'] / best['as written']:.2f}x")
    print(f"  largest relative gradient difference: {diff:.1e}")


if __name__ == "__main__":
    main()
