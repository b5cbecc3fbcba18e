"""The batched CNN's conv blocks as written against the textbook ones: a training step's and an evaluation's time.

``cnn`` (``hetfl.models.cnn``) stacks the clients' channels and runs each convolution as one grouped
``conv2d``. On a CPU in float32 it lays the activations out channels-last (oneDNN's grouped kernels are
faster that way) and applies ReLU after the 2×2 max-pooling, on a quarter of the elements
(``relu(maxpool(h))`` equals ``maxpool(relu(h))`` to the bit, forward and backward). The textbook block is
NCHW, convolution, ReLU, pooling. This times one ``loss_grads`` call (every client's forward and backward on
a minibatch, the engine's training step) and one forward without gradients (an evaluation) both ways, on the
same parameters and minibatch, one torch thread:

    python benchmarks/cnn_layout.py                                    # ffgg_writers: 10 writers a round
    python benchmarks/cnn_layout.py --clients 150                      # ffgg_writers' Local: all 150 writers
    python benchmarks/cnn_layout.py --clients 150 --adapter residual   # its residual adapters
    python benchmarks/cnn_layout.py --clients 20 --channels 4 8        # collab_mnist
    python benchmarks/cnn_layout.py --clients 10 --size 8 --channels 6 16   # the former digits collab_cifar_standin

The two alternate in blocks (``--blocks`` of ``--calls`` calls each); a time is the best block's, so that
other jobs on a shared machine slow both alike. Prints milliseconds per call of each, the ratios textbook /
as written, whether the forward outputs are equal to the bit (on 28×28 images they are; on 8×8 oneDNN picks
kernels that round differently) and the largest relative difference between the gradients (the channels-last
kernels round a gradient's last bit differently). A benchmark, not a test: the
numbers depend on the machine.
"""

from __future__ import annotations

import argparse
import time

import torch
import torch.nn.functional as F
from torch import Tensor

from hetfl.models.base import linear_cm
from hetfl.models.cnn import CNN
from hetfl.models.residual_adapters import adapt_conv, adapt_linear


def textbook(self: CNN, params, x: Tensor) -> Tensor:
    """``CNN.forward`` with NCHW activations and each block as conv, ReLU, then max-pooling."""
    c, b = x.shape[:2]
    h = x.transpose(0, 1).reshape(b, c * self.sample_shape[0], *self.sample_shape[1:])
    for layer in ("conv1", "conv2"):
        weight = self.weight(params, layer)
        h = F.conv2d(
            h, weight.reshape(-1, *weight.shape[2:]), params[f"{layer}.bias"].reshape(-1),
            padding=self.kernel // 2, groups=c,
        )  # fmt: skip
        if self.residual:
            h = adapt_conv(h, params, layer, c)
        h = F.max_pool2d(torch.relu(h), 2)
    h = h.reshape(b, c, self.flat).permute(1, 2, 0)
    h = linear_cm(self.weight(params, "fc1"), params["fc1.bias"], h)
    if self.residual:
        h = adapt_linear(h, params, "fc1")
    return linear_cm(self.weight(params, "fc2"), params["fc2.bias"], torch.relu(h))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--clients", type=int, default=10)
    parser.add_argument("--batch", type=int, default=32)
    parser.add_argument("--size", type=int, default=28, help="image height and width")
    parser.add_argument("--channels", type=int, nargs=2, default=[8, 16])
    parser.add_argument("--hidden", type=int, default=32)
    parser.add_argument("--adapter", choices=["none", "residual"], default="none")
    parser.add_argument("--calls", type=int, default=5)
    parser.add_argument("--blocks", type=int, default=3)
    args = parser.parse_args()
    torch.set_num_threads(1)
    split = {"split": "adapter", "adapter_kind": "residual"} if args.adapter == "residual" else {}
    model = CNN((1, args.size, args.size), 10, channels=args.channels, hidden=args.hidden, **split)
    params = model.init(torch.Generator().manual_seed(0), count=args.clients)
    gen = torch.Generator().manual_seed(1)
    x = torch.rand(args.clients, args.batch, 1, args.size, args.size, generator=gen)
    y = torch.randint(0, 10, (args.clients, args.batch), generator=gen)
    ways = {"as written": CNN.forward, "textbook": textbook}
    train = dict.fromkeys(ways, float("inf"))
    evaluate = dict.fromkeys(ways, float("inf"))
    grads, outputs = {}, {}
    try:
        for _ in range(args.blocks):
            for name, forward in ways.items():
                CNN.forward = forward
                grads[name] = model.loss_grads(params, x, y, None)[1]  # warm-up, and the gradients compared
                start = time.perf_counter()
                for _ in range(args.calls):
                    model.loss_grads(params, x, y, None)
                train[name] = min(train[name], (time.perf_counter() - start) / args.calls)
                with torch.no_grad():
                    outputs[name] = model.forward(params, x)
                    start = time.perf_counter()
                    for _ in range(args.calls):
                        model.forward(params, x)
                evaluate[name] = min(evaluate[name], (time.perf_counter() - start) / args.calls)
    finally:
        CNN.forward = ways["as written"]
    mine, theirs = grads["as written"], grads["textbook"]
    diff = max(float((mine[k] - theirs[k]).abs().max() / theirs[k].abs().max()) for k in mine)
    shape = f"{args.clients} clients x {args.batch} images {args.size}x{args.size}, channels {args.channels}"
    print(f"cnn, {shape}, adapter {args.adapter}, 1 thread (best of {args.blocks} blocks)")
    for name in ways:
        print(f"  {name:10s} loss_grads {train[name] * 1e3:8.1f} ms, forward {evaluate[name] * 1e3:8.1f} ms")
    print(f"  textbook / as written: loss_grads {train['textbook'] / train['as written']:.2f}x, "
          f"forward {evaluate['textbook'] / evaluate['as written']:.2f}x")  # fmt: skip
    print(f"  forward outputs equal to the bit: {torch.equal(outputs['as written'], outputs['textbook'])}")
    print(f"  largest relative gradient difference: {diff:.1e}")


if __name__ == "__main__":
    main()
