"""The minimax objectives on client data (docs/papers/fedminimax.md §4.2-4.3), batched over clients.

- ``robust`` (Eq. (7), reconstructed): min_x max_{‖y‖₂ ≤ r} Σ_j ℓ(h_x(a_j + y), b_j), y one universal
  input-shaped perturbation (y^(0) = 0). Robust accuracy: accuracy on the pooled test set at the worst
  perturbation found by projected normalized gradient ascent from the current y (``attack_steps``
  steps of length ``attack_lr``·r), the model frozen (docs/papers/fedminimax.md §4.2). Its primal functions
  Φ(x) = max_{‖y‖≤r} F(x, y) and Φ̃ of the surrogate F̃ have no closed form (F is not concave in y): each is
  estimated by the same ascent on the training objective Σ_i w_i f_i(x, y) (w = p, or w̃), from the current
  y and ``phi_restarts`` more starts drawn on the sphere ‖y‖ = r (a fixed stream: the same starts for
  every run and evaluation), ``phi_steps`` steps each (null: ``attack_steps``; 0: not estimated, not
  reported), as the largest value any iterate reached: a lower bound of Φ(x), Φ̃(x).
- ``fair`` (Eq. (8), reconstructed): min_x max_{y ∈ Δ_C} Σ_c y_c F_c(x) − (λ/2)‖y‖² (+ (μ/2)‖x‖² with ``l2_x`` μ > 0), with
  f_i(x, y) = Σ_c y_c F_{c,i}(x) − (λ/2)‖y‖², F_{c,i} = (1/n_i) Σ_{j∈D_i, b_j=c} ℓ_j / π_c and
  π_c = N_c/N, so Σ_i p_i f_i = F for p_i = n_i/N; y^(0) = 1/C; unbiased minibatch gradients
  ∇_x = (1/|B|) Σ_j (y_{b_j}/π_{b_j}) ∇ℓ_j, ∂_{y_c} = (1/|B|) Σ_j 1[b_j = c] ℓ_j/π_c − λ y_c.
  "Worst distribution test accuracy" = the lowest per-class accuracy on the pooled test set.
  Its primal functions, in closed form (the inner maximization is a projection onto the simplex):
  Φ(x) = max_{y∈Δ_C} F(x, y) (Corollary 1.1's Φ, ``phi_global``) and Φ̃(x) = max_y F̃(x, y) of the surrogate
  F̃ = Σ_i w̃_i f_i, w̃_i ∝ p_i E‖ā_i‖₁, to which Local SGDA converges (Theorem 1, Eq. (2);
  ``phi_surrogate_global``).
- ``standard``: plain minimization (y is empty): Local SGDA is FedAvg with heterogeneous τ_i and
  Fed-Norm-SGDA is FedNova.

Gradients: an MLP (``mlr``, ``dnn``) takes the robust gradients from its hand-written backward, with
y folded into the first bias (W₁(a + y) + b₁ = W₁a + (b₁ + W₁y), so ∇_y f = W₁ᵀ ∇_{b₁} f and
∇_{W₁} f gains ∇_{b₁} f yᵀ): exact, and about 2x faster than autograd. Other models use autograd.
"""

from __future__ import annotations

from typing import ClassVar

import torch
import torch.nn.functional as F
from torch import Tensor

from hetfl.algorithms.minimax.projections import project_ball, project_simplex
from hetfl.engine.evaluate import top1
from hetfl.engine.federation import Batch, ClientSplit, Federation
from hetfl.engine.params import Params
from hetfl.models.linalg import bmm
from hetfl.models.mlp import MLP

METRICS = (
    "train_loss_minimax_global",
    "test_acc_at_y_global",
    "robust_acc_global",
    "robust_loss_global",
    "worst_class_acc_global",
    "y_norm",
    "y_max",
    "phi_global",
    "phi_surrogate_global",
)
"""Metrics an objective may add: the training objective Σ_i p_i f_i(x, y) (Figs 6/7), robust (Figs 3/4)
and worst-class (Figs 5/10) test accuracy, the size of y, and (fair) the primal functions Φ and Φ̃."""

CHUNK = 2048  # samples per forward in evaluation


def _masked_mean(per: Tensor, batch: Batch) -> Tensor:
    """Each row's mean of ``per [m, B]`` over its valid samples: ``[m]``."""
    if batch.full:
        return per.mean(1)
    mask = batch.mask.to(per.dtype)
    return (per * mask).sum(1) / mask.sum(1)


def _leaves(params: Params) -> dict[str, Tensor]:
    return {k: v.detach().requires_grad_(True) for k, v in params.items()}


class Objective:
    """f_i(x, y) on client data, for the clients ``0..n-1`` of a federation.

    Args:
        fed: the federation; n: clients in the objective; p: ``Tensor[n]`` their weights; surrogate:
            ``Tensor[n]`` the weights w̃ of the surrogate objective F̃ = Σ_i w̃_i f_i (float64, Σ = 1; None: p).
    """

    name: ClassVar[str]
    metrics: ClassVar[tuple[str, ...]]
    """The names :meth:`evaluate` may report, in the order of :data:`METRICS`."""

    @classmethod
    def reported(cls, hp) -> tuple[str, ...]:
        """The names :meth:`evaluate` reports under the hyper-parameters ``hp``: :attr:`metrics` by default."""
        return cls.metrics

    def __init__(self, fed: Federation, n: int, p: Tensor, hp, surrogate: Tensor | None = None):
        self.fed, self.model, self.n, self.p, self.hp = fed, fed.model, n, p, hp
        self.surrogate = p if surrogate is None else surrogate

    def init_y(self) -> Tensor:
        """y^(0): ``[1, ...]``."""
        raise NotImplementedError

    def project(self, y: Tensor) -> Tensor:
        """Π_Y, row by row."""
        return y

    def grads(self, x: Params, y: Tensor, batch: Batch, x_hat: Params | None) -> tuple[Params, Tensor]:
        """Minibatch gradients (∇_x f_i(x_i, y_i; ξ_i), ∇_y f_i(x̂ or x_i, y_i; ξ_i)), ``[m, ...]`` each."""
        raise NotImplementedError

    def evaluate(self, x: Params, y: Tensor) -> list[tuple[str, float]]:
        """The objective's metrics for the server model ``x [1, ...]``, ``y [1, ...]``."""
        return []

    # --- pooled evaluation helpers -------------------------------------------------------------

    def per_sample(self, x: Params, data: ClientSplit, shift: Tensor | None = None) -> tuple[Tensor, Tensor]:
        """Loss and correctness of the shared model on every sample of ``data`` (input + ``shift``).

        Returns:
            ``(loss [n_samples], correct [n_samples])`` float64, in the split's client-contiguous order.
        """
        losses, correct = [], []
        with torch.no_grad():
            for start in range(0, len(data.y), CHUNK):
                xb, yb = data.x[start : start + CHUNK], data.y[start : start + CHUNK]
                if shift is not None:
                    xb = xb + shift
                logits = self.model.forward(x, xb.unsqueeze(0))[0]  # [K, b]
                losses.append(F.cross_entropy(logits.T, yb, reduction="none").double())
                correct.append((top1(logits[None])[0] == yb).double())
        return torch.cat(losses).cpu(), torch.cat(correct).cpu()

    def client_means(self, values: Tensor, data: ClientSplit) -> Tensor:
        """Per-client means of per-sample ``values`` over the objective's n clients: ``[n]``."""
        owner = torch.repeat_interleave(torch.arange(data.num_clients), data.sizes)
        sums = torch.zeros(data.num_clients, dtype=torch.float64).index_add_(0, owner, values)
        return (sums / data.sizes.double())[: self.n]


class Robust(Objective):
    """Robust training against one universal perturbation y with ‖y‖₂ ≤ ``radius`` (Eq. (7))."""

    metrics = tuple(
        m
        for m in METRICS
        if m
        in (
            "train_loss_minimax_global",
            "test_acc_at_y_global",
            "robust_acc_global",
            "robust_loss_global",
            "y_norm",
            "phi_global",
            "phi_surrogate_global",
        )
    )

    name = "robust"

    @classmethod
    def reported(cls, hp) -> tuple[str, ...]:
        """:attr:`metrics`, without Φ and Φ̃ when they are not estimated (:meth:`phi_steps` 0)."""
        return tuple(m for m in cls.metrics if cls.phi_steps(hp) or not m.startswith("phi_"))

    @staticmethod
    def phi_steps(hp) -> int:
        """The ascent steps of the Φ, Φ̃ estimates: ``phi_steps``, or ``attack_steps`` when it is null."""
        return hp.attack_steps if hp.phi_steps is None else hp.phi_steps

    def init_y(self) -> Tensor:
        return torch.zeros(1, *self.fed.train.x.shape[1:], dtype=self.fed.dtype, device=self.fed.device)

    def project(self, y: Tensor) -> Tensor:
        return project_ball(y, self.hp.radius)

    def grads(self, x, y, batch, x_hat):
        if (
            isinstance(self.model.inner, MLP)  # the federation's model: a ChunkedModel
            and "fc1.bias" in x
            and getattr(self.model, "split", "none") != "adapter"
        ):
            return self._mlp_grads(x, y, batch, x_hat)
        leaves, y_leaf = _leaves(x), y.detach().requires_grad_(True)
        with torch.enable_grad():
            loss = _masked_mean(self._losses(leaves, y_leaf, batch), batch)
            if x_hat is None:
                *g_x, g_y = torch.autograd.grad(loss.sum(), [*leaves.values(), y_leaf])
            else:  # Fed-Norm-SGDA+ lines 11, 16: ∇_y f_i(x̂, y_i; ξ), the same minibatch
                g_x = torch.autograd.grad(loss.sum(), list(leaves.values()))
                y_leaf = y.detach().requires_grad_(True)
                loss_hat = _masked_mean(self._losses(x_hat, y_leaf, batch), batch)
                (g_y,) = torch.autograd.grad(loss_hat.sum(), [y_leaf])
        return dict(zip(leaves, g_x, strict=True)), g_y

    def _losses(self, x: Params, y: Tensor, batch: Batch) -> Tensor:
        return F.cross_entropy(self.model.forward(x, batch.x + y.unsqueeze(1)), batch.y, reduction="none")

    def _mlp_grads(self, x, y, batch, x_hat):
        """Robust gradients of an MLP from its own backward, y folded into the first bias (exact)."""
        mask = None if batch.full else batch.mask
        y_flat = y.reshape(len(y), -1)  # [m, d]

        def folded(params: Params) -> Params:  # b₁ + W₁ y
            shift = bmm(params["fc1.weight"], y_flat.unsqueeze(2)).squeeze(2)
            return {**params, "fc1.bias": params["fc1.bias"] + shift}

        _, g = self.model.loss_grads(folded(x), batch.x, batch.y, mask)
        g_b1, w1 = g["fc1.bias"], x["fc1.weight"]
        g["fc1.weight"] = g["fc1.weight"] + g_b1.unsqueeze(2) * y_flat.unsqueeze(1)
        if x_hat is not None:  # the y-gradient at the snapshot x̂
            g_b1 = self.model.loss_grads(folded(x_hat), batch.x, batch.y, mask)[1]["fc1.bias"]
            w1 = x_hat["fc1.weight"]
        g_y = bmm(w1.transpose(1, 2), g_b1.unsqueeze(2)).reshape(y.shape)  # W₁ᵀ ∇_{b₁}
        return g, g_y

    def attack(self, x: Params, y: Tensor) -> Tensor:
        """The worst perturbation for the frozen model ``x``: ``attack_steps`` steps of projected
        normalized gradient ascent on the pooled test loss, from ``y [1, ...]``
        (docs/papers/fedminimax.md §4.2)."""
        return self.ascent(x, y, self.fed.test)[0]

    def ascent(
        self, x: Params, y: Tensor, data: ClientSplit, weights: Tensor | None = None, steps: int | None = None
    ) -> tuple[Tensor, list[float]]:
        """``steps`` (None: ``attack_steps``) steps of projected normalized gradient ascent in y, of step ``attack_lr``·r, on a
        loss of the frozen model ``x`` on the samples of ``data`` shifted by y, from ``y [1, ...]``: the pooled
        mean loss (``weights`` None: the robust-accuracy attack), or Σ_s weights_s ℓ_s over the first
        ``len(weights)`` samples (``weights [m]`` float64, CPU).

        Returns:
            the last iterate ``[1, ...]`` and, with ``weights``, the loss at every iterate (``steps`` + 1 floats;
            empty without ``weights``).
        """
        hp = self.hp
        steps = hp.attack_steps if steps is None else steps
        count = len(data.y) if weights is None else len(weights)
        y_adv, values = y.detach().clone(), []
        for step_k in range(steps + (weights is not None)):
            y_leaf = y_adv.requires_grad_(True)
            grad, value = torch.zeros_like(y_adv), 0.0
            with torch.enable_grad():
                for start in range(0, count, CHUNK):
                    stop = min(start + CHUNK, count)
                    xb, yb = data.x[start:stop], data.y[start:stop]
                    logits = self.model.forward(x, (xb + y_leaf[0]).unsqueeze(0))
                    if weights is None:
                        loss = F.cross_entropy(logits, yb.unsqueeze(0), reduction="sum") / len(data.y)
                    else:
                        per = F.cross_entropy(logits, yb.unsqueeze(0), reduction="none")[0]
                        value += float(per.detach().double().cpu() @ weights[start:stop])
                        loss = per @ weights[start:stop].to(per)
                    if step_k < steps:
                        grad += torch.autograd.grad(loss, [y_leaf])[0]
            values += [value] if weights is not None else []
            if step_k == steps:  # the last iterate's value only
                break
            step = hp.attack_lr * hp.radius / grad.norm().clamp_min(torch.finfo(grad.dtype).tiny)
            y_adv = self.project(y_adv.detach() + step * grad)
        return y_adv.detach(), values

    def phi(self, x: Params, y: Tensor, w: Tensor) -> float:
        """The estimate of max_{‖y‖≤r} Σ_i w_i f_i(x, y) for client weights ``w [n]`` (float64): the largest
        training objective that :meth:`ascent` reaches in :meth:`phi_steps` steps from ``y [1, ...]`` and from
        ``phi_restarts`` starts on the sphere ‖y‖ = r (drawn from a generator seeded 0: the same for every run and
        evaluation)."""
        data = self.fed.train
        sizes = data.sizes[: self.n].double()
        weights = torch.repeat_interleave(w / sizes, data.sizes[: self.n])  # w_i / n_i per sample of client i
        g = torch.Generator().manual_seed(0)
        starts = [y]
        for _ in range(self.hp.phi_restarts):
            d = torch.randn(y.shape, generator=g, dtype=torch.float64)
            starts.append((self.hp.radius * d / d.norm()).to(y))
        steps = self.phi_steps(self.hp)
        return max(max(self.ascent(x, start, data, weights, steps)[1]) for start in starts)

    def evaluate(self, x, y):
        train_loss, _ = self.per_sample(x, self.fed.train, y[0])
        test_loss, test_correct = self.per_sample(x, self.fed.test, y[0])
        adv_loss, adv_correct = self.per_sample(x, self.fed.test, self.attack(x, y)[0])
        return [
            ("train_loss_minimax_global", float(self.p @ self.client_means(train_loss, self.fed.train))),
            ("test_acc_at_y_global", float(test_correct.mean())),
            ("robust_acc_global", float(adv_correct.mean())),
            ("robust_loss_global", float(adv_loss.mean())),
            ("y_norm", float(y.norm())),
            *(
                [
                    ("phi_global", self.phi(x, y, self.p)),  # Φ(x), estimated
                    ("phi_surrogate_global", self.phi(x, y, self.surrogate)),  # Φ̃(x), F̃ = Σ_i w̃_i f_i
                ]
                if self.phi_steps(self.hp)
                else []
            ),
        ]


def simplex_max(values: Tensor, lam: float) -> float:
    """max_{y ∈ Δ_C} ⟨y, v⟩ − (λ/2)‖y‖² of ``values`` v ``[C]`` (float64): the maximizer is y* = Π_Δ(v/λ), since
    the objective is −(λ/2)‖y − v/λ‖² + ‖v‖²/(2λ); with λ = 0, max_c v_c (a vertex)."""
    if lam == 0:
        return float(values.max())
    y = project_simplex((values / lam).unsqueeze(0))[0]
    return float(values @ y - 0.5 * lam * (y @ y))


class Fair(Objective):
    """Fair classification over class weights y ∈ Δ_C with −(λ/2)‖y‖², λ = ``fair_lambda`` (Eq. (8))."""

    metrics = tuple(
        m
        for m in METRICS
        if m
        in (
            "train_loss_minimax_global",
            "worst_class_acc_global",
            "y_norm",
            "y_max",
            "phi_global",
            "phi_surrogate_global",
        )
    )

    name = "fair"

    def __init__(self, fed, n, p, hp, surrogate=None):
        super().__init__(fed, n, p, hp, surrogate)
        labels = fed.train.y[: int(fed.train.offsets[n])].cpu()
        counts = torch.bincount(labels, minlength=fed.model.num_classes).double()
        self.prior = (counts / counts.sum()).clamp_min(1.0 / counts.sum())  # π_c = N_c / N
        self.prior_dev = self.prior.to(device=fed.device, dtype=fed.dtype)

    def init_y(self) -> Tensor:
        k = self.model.num_classes
        return torch.full((1, k), 1.0 / k, dtype=self.fed.dtype, device=self.fed.device)

    def project(self, y: Tensor) -> Tensor:
        return project_simplex(y)

    def _class_losses(self, per: Tensor, batch: Batch) -> Tensor:
        """(1/|B|) Σ_j 1[b_j = c] ℓ_j / π_c for each row: ``[m, C]``."""
        m = per if batch.full else per * batch.mask.to(per.dtype)
        count = per.shape[1] if batch.full else batch.mask.sum(1, keepdim=True).to(per.dtype)
        sums = torch.zeros(per.shape[0], self.model.num_classes, dtype=per.dtype, device=per.device)
        return sums.scatter_add_(1, batch.y, m) / count / self.prior_dev

    def grads(self, x, y, batch, x_hat):
        leaves = _leaves(x)
        with torch.enable_grad():
            per = F.cross_entropy(self.model.forward(leaves, batch.x), batch.y, reduction="none")  # [m, B]
            weight = (y / self.prior_dev).gather(1, batch.y)  # y_{b_j} / π_{b_j}
            loss = _masked_mean(weight.detach() * per, batch)
            g_x = torch.autograd.grad(loss.sum(), list(leaves.values()))
        if x_hat is not None:  # the y-gradient at the snapshot x̂ ("+" variants)
            with torch.no_grad():
                per = F.cross_entropy(self.model.forward(x_hat, batch.x), batch.y, reduction="none")
        g_y = self._class_losses(per.detach(), batch) - self.hp.fair_lambda * y
        grads = dict(zip(leaves, g_x, strict=True))
        if self.hp.l2_x:  # (μ/2)‖x‖² in every f_i
            grads = {k: g + self.hp.l2_x * x[k] for k, g in grads.items()}
        return grads, g_y

    def evaluate(self, x, y):
        k = self.model.num_classes
        train_loss, _ = self.per_sample(x, self.fed.train, None)
        data = self.fed.train
        owner = torch.repeat_interleave(torch.arange(data.num_clients), data.sizes)
        cell = owner * k + data.y.cpu()  # (client, class) of each sample
        sums = torch.zeros(data.num_clients * k, dtype=torch.float64).index_add_(0, cell, train_loss)
        f_ci = sums.view(-1, k)[: self.n] / data.sizes[: self.n, None].double() / self.prior  # F_{c,i}
        yd = y[0].double().cpu()
        ridge = 0.5 * self.hp.l2_x * sum(float(v.double().pow(2).sum()) for v in x.values())  # (μ/2)‖x‖²
        objective = float(self.p @ (f_ci @ yd)) - 0.5 * self.hp.fair_lambda * float(yd @ yd) + ridge
        _, correct = self.per_sample(x, self.fed.test, None)
        labels = self.fed.test.y.cpu()
        hits = torch.zeros(k, dtype=torch.float64).index_add_(0, labels, correct)
        counts = torch.bincount(labels, minlength=k).double()
        per_class = hits[counts > 0] / counts[counts > 0]
        lam = self.hp.fair_lambda
        return [
            ("train_loss_minimax_global", objective),
            ("worst_class_acc_global", float(per_class.min())),
            ("y_norm", float(yd.norm())),
            ("y_max", float(yd.max())),
            (
                "phi_global",
                simplex_max(self.p @ f_ci, lam) + ridge,
            ),  # Φ(x) = max_y Σ_c y_c F_c(x) − (λ/2)‖y‖²
            (
                "phi_surrogate_global",
                simplex_max(self.surrogate @ f_ci, lam) + ridge,
            ),  # Φ̃(x), F̃ = Σ_i w̃_i f_i
        ]


class Standard(Objective):
    """Plain minimization, no y (``y`` is ``[1, 0]``): f_i(x) = the mean cross-entropy on D_i."""

    metrics = tuple(m for m in METRICS if m in ("train_loss_minimax_global",))

    name = "standard"

    def init_y(self) -> Tensor:
        return torch.zeros(1, 0, dtype=self.fed.dtype, device=self.fed.device)

    def grads(self, x, y, batch, x_hat):
        _, g = self.model.loss_grads(x, batch.x, batch.y, None if batch.full else batch.mask)
        return g, torch.zeros_like(y)

    def evaluate(self, x, y):
        loss, _ = self.per_sample(x, self.fed.train)
        return [("train_loss_minimax_global", float(self.p @ self.client_means(loss, self.fed.train)))]


OBJECTIVES: dict[str, type[Objective]] = {o.name: o for o in (Robust, Fair, Standard)}
