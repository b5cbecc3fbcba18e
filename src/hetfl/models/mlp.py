"""Multilayer perceptrons with a hand-written batched backward pass.

``MLP(hidden=[h1, ..., hL])``: flatten -> Linear -> ReLU -> ... -> Linear(K). MLR (no hidden layer) and
the DNN of pFedMe are instances. Layers ``fc1 .. fc{L+1}``, column-major: ``fc{l}.weight [C, out, in]``,
activations ``[C, features, B]``.

``loss_grads`` computes each client's mean cross-entropy and its gradients by explicit
backpropagation (softmax − one-hot, then ``bmm`` per layer): the same numbers as autograd (tested),
without autograd's per-node overhead, which dominates these small per-client products.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from hetfl.models.adapters import LoRALinear
from hetfl.models.base import BatchedModel, Params
from hetfl.models.errors import ModelOptionError
from hetfl.models.linalg import bmm

LOGITS = ("auto", "one", "per_class")


class MLP(BatchedModel):
    """flatten -> [Linear -> ReLU] × len(hidden) -> Linear(K).

    Args:
        hidden: widths of the hidden layers (empty: multinomial logistic regression).
        bias: whether the layers have biases.
        logits: ``per_class`` (K outputs, softmax cross-entropy), ``one`` (a two-class task's logistic model:
            one output z, the logits ``[0, z]``, so that softmax cross-entropy is the binary cross-entropy of
            sigmoid(z), and the gradient in z is σ(z) − y, the logistic regression of ``nn.Linear(d, 1)`` with
            ``BCEWithLogitsLoss``) or ``auto`` (``one`` for a two-class classification, else ``per_class``),
            decided when the model's ``task`` is set.
        split, adapter_rank: the personalization split (``hetfl.models.adapters``).

    Raises:
        ModelOptionError: ``logits: one`` on a task that is not a two-class classification (option ``logits``).
    """

    name = "mlp"

    def __init__(
        self,
        sample_shape,
        num_classes,
        hidden: list[int] | tuple[int, ...] = (),
        bias: bool = True,
        logits: str = "per_class",
        **split,
    ):
        super().__init__(sample_shape, num_classes, **split)
        if logits not in LOGITS:
            raise ModelOptionError("logits", f"unknown logits {logits!r}; allowed: {', '.join(LOGITS)}")
        self.hidden = tuple(int(h) for h in hidden)
        self.bias = bool(bias)
        self.logits = logits
        self._task = "classification"  # until build_model sets the data's task
        self._layout()

    @property
    def task(self) -> str:
        return self._task

    @task.setter
    def task(self, value: str) -> None:
        self._task = value
        self._layout()

    def _layout(self) -> None:
        """The layers ``fc``: ``(name, in, out)``, the last of 1 output for ``one_logit``."""
        binary = self._task == "classification" and self.num_classes == 2
        if self.logits == "one" and not binary:
            raise ModelOptionError("logits", "logits: one needs a two-class classification task")
        self.one_logit = binary and self.logits in ("one", "auto")
        widths = (self.in_features, *self.hidden, 1 if self.one_logit else self.num_classes)
        self.fc = [(f"fc{i + 1}", widths[i], widths[i + 1]) for i in range(len(widths) - 1)]

    def _logits(self, z: Tensor) -> Tensor:
        """The logits ``[C, K, B]`` of the last layer's outputs ``z [C, out, B]``: ``[0, z]`` with one logit."""
        return torch.cat([torch.zeros_like(z), z], 1) if self.one_logit else z

    def layer_shapes(self):
        out = {}
        for name, fan_in, fan_out in self.fc:
            out[f"{name}.weight"] = ((fan_out, fan_in), fan_in)
            if self.bias:
                out[f"{name}.bias"] = ((fan_out,), fan_in)
        return out

    def _forward(
        self, params: Params, x: Tensor | None, z1: Tensor | None = None
    ) -> tuple[Tensor, list[Tensor]]:
        """Logits ``[C, K, B]`` and the input of every layer (column-major), for the backward pass.

        ``z1 [C, out, B]``, when given, is the first layer's product ``W x`` (without its bias), used
        instead of computing it; ``x`` is then not needed (the first input is recorded as None).
        """
        h = None if x is None else self.flat_input(x)
        inputs = []
        for i, (name, _, _) in enumerate(self.fc):
            inputs.append(h)
            if i == 0 and z1 is not None:  # a new tensor: z1 stays as it is
                z = z1 + params[f"{name}.bias"].unsqueeze(2) if self.bias else z1.clone()
            else:
                z = bmm(self.weight(params, name), h)
                if self.bias:
                    z = z.add_(params[f"{name}.bias"].unsqueeze(2))
            h = torch.relu_(z) if i < len(self.fc) - 1 else self._logits(z)
        return h, inputs

    def forward(self, params: Params, x: Tensor) -> Tensor:
        if torch.is_grad_enabled() and (x.requires_grad or any(p.requires_grad for p in params.values())):
            h = self.flat_input(x)  # differentiable path (autograd callers: gradients in params or inputs)
            for i, (name, _, _) in enumerate(self.fc):
                h = torch.bmm(self.weight(params, name), h)
                h = h + params[f"{name}.bias"].unsqueeze(2) if self.bias else h
                h = torch.relu(h) if i < len(self.fc) - 1 else self._logits(h)
            return h
        return self._forward(params, x)[0]

    @torch.no_grad()
    def loss_grads(self, params: Params, x: Tensor, y: Tensor, mask: Tensor | None) -> tuple[Tensor, Params]:
        """Per-client mean loss over valid samples and its gradients, by backpropagation.

        Cross-entropy (classification) or squared error averaged over outputs (regression).

        Args:
            params: ``[C, ...]``; x: ``[C, B, *sample_shape]``; y: ``[C, B]`` labels or ``[C, B, K]``
            targets; mask: ``[C, B]`` bool or None.

        Returns:
            ``(loss [C], grads dict[str, Tensor[C, ...]])``.
        """
        out, inputs = self._forward(params, x)
        loss, grads, _ = self._backward(params, out, inputs, y, mask, first_weight=True)
        return loss, {k: grads[k] for k in params}

    def linear_input_layer(self) -> str | None:
        """``fc1``: the logits depend on ``fc1.weight`` only through ``fc1.weight @ x`` (see the base class).

        None with the adapter split (the effective weight is ``W + up · down``)."""
        return None if self.split == "adapter" else self.fc[0][0]

    @torch.no_grad()
    def loss_grads_preact(
        self, params: Params, z1: Tensor, y: Tensor, mask: Tensor | None, need_loss: bool = True
    ) -> tuple[Tensor | None, Params, Tensor]:
        """Loss and gradients given the first layer's product ``z1 = fc1.weight @ x``.

        Args:
            params: ``[C, ...]``; z1: ``[C, out1, B]``; y, mask: as in :meth:`loss_grads`;
            need_loss: False: the loss is not computed (None), only the gradients.

        Returns:
            ``(loss [C], grads of every parameter but fc1.weight, delta [C, out1, B])``: ``delta`` is the
            gradient in ``z1``, so that the gradient in ``fc1.weight`` is ``delta @ xᵀ``.
        """
        out, inputs = self._forward(params, None, z1)
        loss, grads, delta = self._backward(
            params, out, inputs, y, mask, first_weight=False, need_loss=need_loss
        )
        return loss, {k: grads[k] for k in params if k in grads}, delta

    def _backward(
        self,
        params: Params,
        out: Tensor,
        inputs: list,
        y: Tensor,
        mask: Tensor | None,
        first_weight: bool,
        need_loss: bool = True,
    ) -> tuple[Tensor | None, Params, Tensor]:
        """``(loss [C] or None, grads, dL/dz1 [C, out1, B])`` from the logits and the layers' inputs;
        ``fc1.weight``'s gradient only if ``first_weight``, the loss only if ``need_loss``."""
        loss = None
        if self.task == "classification":
            if need_loss:
                logp = torch.log_softmax(out, 1)  # [C, K, B]
                loss = F.nll_loss(logp, y, reduction="none")  # [C, B]
                delta = logp.exp_()  # d(cross-entropy)/d(logits) = softmax − one-hot
            else:
                delta = torch.softmax(out, 1)
            delta.scatter_add_(1, y.unsqueeze(1), torch.full_like(y, -1, dtype=delta.dtype).unsqueeze(1))
        else:
            delta = out - y.transpose(1, 2)  # residual [C, K, B]
            loss = delta.pow(2).mean(1) if need_loss else None
            delta.mul_(2.0 / out.shape[1])  # d(mean_k r_k²)/d(out)
        if mask is None:
            count = float(y.shape[1])
            loss = None if loss is None else loss.mean(1)
            delta.div_(count)  # dL/dz of the last layer, [C, K, B]
        else:
            m = mask.to(delta.dtype)
            count = m.sum(1)
            delta.mul_(m.unsqueeze(1))
            loss = None if loss is None else (loss * m).sum(1) / count
            delta.div_(count.view(-1, 1, 1))
        if self.one_logit:  # the constant logit 0 has no parameter: dL/dz = σ(z) − y
            delta = delta[:, 1:].contiguous()
        grads: Params = {}
        for i in range(len(self.fc) - 1, -1, -1):
            name = self.fc[i][0]
            h = inputs[i]  # [C, in, B]
            if self.bias:
                grads[f"{name}.bias"] = delta.sum(2)
            if i == 0 and not first_weight:
                break
            g_w = bmm(delta, h.transpose(1, 2))  # gradient in the effective weight [C, out, in]
            grads[f"{name}.weight"] = g_w
            if self.split == "adapter":  # W_eff = W + up · down
                up, down = params[f"{name}.lora_up"], params[f"{name}.lora_down"]
                grads[f"{name}.lora_up"] = bmm(g_w, down.transpose(1, 2))
                grads[f"{name}.lora_down"] = bmm(up.transpose(1, 2), g_w)
            if i:
                delta = bmm(self.weight(params, name).transpose(1, 2), delta).mul_(h > 0)  # ReLU'
        return loss, grads, delta

    def reference_module(self) -> nn.Module:
        rank = self.adapter_rank if self.split == "adapter" else 0
        return _MLPModule(
            [(fan_in, fan_out) for _, fan_in, fan_out in self.fc], self.bias, rank, self.one_logit
        )


class _MLPModule(nn.Module):
    def __init__(self, sizes, bias=True, rank=0, one_logit=False):
        super().__init__()
        for i, (fan_in, fan_out) in enumerate(sizes):
            layer = LoRALinear(fan_in, fan_out, rank, bias) if rank else nn.Linear(fan_in, fan_out, bias=bias)
            self.add_module(f"fc{i + 1}", layer)
        self.depth = len(sizes)
        self.one_logit = one_logit

    def forward(self, x):
        h = x.flatten(1)
        for i in range(self.depth):
            h = getattr(self, f"fc{i + 1}")(h)
            h = torch.relu(h) if i < self.depth - 1 else h
        return torch.cat([torch.zeros_like(h), h], 1) if self.one_logit else h  # [B, K]
