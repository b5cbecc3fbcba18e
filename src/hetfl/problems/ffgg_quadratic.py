"""The Example 1 quadratic problem of FFGG, generated exactly and kept as per-client Gram matrices.

Mishchenko, Islamov, Gorbunov, Horváth, "Partially Personalized Federated Learning: Breaking the Curse
of Data Heterogeneity", TMLR 2025 (arXiv:2305.18285): Example 1, Section 5.1 and Appendix E.1–E.3;
official notebooks https://github.com/Rustem-Islamov/FL_representations (docs/papers/ffgg.md §1.2, §4, §9).

Client m (of M) holds

    f_m(θ, w) = ½‖H_m θ − b_m‖² + ½‖A_m θ + B_m w − y_m‖²,   H_m, A_m ∈ R^{n×d_θ}, B_m ∈ R^{n×d_w},

θ ∈ R^{d_θ} global, w ∈ R^{d_w} personal. With w_m^*(θ) = argmin_w f_m(θ, w) (Definition 1) the
operator is F_m(θ) = ∇_1 f_m(θ, w_m^*(θ)) and F = (1/M) Σ_m F_m; FFGG looks for θ^* with F(θ^*) = 0.

Generation (``matrices``, ``targets``; ι = ``noise``):

- ``independent`` (§5.1): H_m, A_m ~ U(0,1)^{n×d_θ}/d_θ and B_m ~ U(0,1)^{n×d_w}/d_w, independent per client.
- ``zeta`` (App. E.1): shared H, A, B drawn as above, then H_m = H + ζ_H H'_m/‖H'_m‖,
  A_m = A + ζ A'_m/‖A'_m‖, B_m = B + ζ B'_m/‖B'_m‖ with H'_m, A'_m, B'_m ~ N(0,1) and ζ_H = ζ (the
  paper; the official notebooks use ζ_H = 1: ``zeta_H: 1``). ``zeta_norm``: ``fro`` (``np.linalg.norm``, the
  code) or ``spectral`` (the paper's ‖·‖_2 read literally).
- targets ``per_client`` (the default; the official notebooks, which drew the paper's figures):
  b_m = H_m b1_m + ι b2_m, y_m = A_m y1_m + B_m y2_m + ι y3_m with b1_m, y1_m ~ N(0, I_{d_θ}),
  y2_m ~ N(0, I_{d_w}), b2_m, y3_m ~ N(0, I_n) drawn per client; ``shared``: the same b1, y1, y2 for every
  client, fresh noise per client. **The code deviates from the paper here**: App. E.1's equations,
  y_m = A_m y_1 + B_m y_2 + ι y_3 and b_m = H_m b_1 + ι b_2, carry no client index on b_1, y_1, y_2
  (``shared``); §5.1 does not say how b_m, y_m are drawn. The default studies (``ffgg_fig1a``,
  ``ffgg_fig1bcd``, ``ffgg_zeta``, ``ffgg_async``) use ``per_client``, as the notebooks;
  ``overpersonalized`` (App. E.3, the Byzantine notebook): one θ_true ~ N(0, I), b_m = H_m θ_true,
  y_m = A_m θ_true + B_m y2_m, no noise (``noise`` must be 0), so F_m(θ_true) = 0 for every m (Assumption 2).
- ``noise_quirk``: the notebooks' ``noise_scale * rng.normal(n)`` draws ONE scalar from N(n, 1) (a
  constant shift of every row), not a length-n vector; false by default.

Random numbers: NumPy's PCG64 (``default_rng``) on ``SeedSequence(seed).spawn(M + 1)``: child 0 draws
the shared quantities (H, A, B for ``zeta``, then b1, y1, y2 for ``shared`` or θ_true for
``overpersonalized``), child m + 1 those of client m, in the order H_m (or H'_m), A_m, B_m, then
b1_m, y1_m, y2_m (or y2_m alone), then the noise b2_m, y3_m. A client's data do not depend on M.
``seed`` is the data seed, fixed (42, the notebooks' ``default_rng(42)``) so every run seed sees the
same problem; ``seed: null`` uses the run seed instead.

Only the Grams are kept (sizes ≤ d_θ × d_θ per client): G_m = H_mᵀH_m + A_mᵀA_m, A_mᵀB_m, B_mᵀB_m,
g_m = H_mᵀb_m + A_mᵀy_m, B_mᵀy_m and c_m = ½(‖b_m‖² + ‖y_m‖²). Every gradient, w^*, F and loss is an
exact function of them, so n = 10000 costs only the generation. All tensors are ``[M, ...]``, batched.
"""

from __future__ import annotations

import dataclasses
from functools import cached_property
from typing import Literal

import numpy as np
import torch
from torch import Tensor

from hetfl.errors import ConfigError
from hetfl.models.linalg import bmm
from hetfl.options import Options, option
from hetfl.problems.base import Problem


@dataclasses.dataclass(frozen=True)
class FFGGQuadraticOptions(Options):
    """Options of ``ffgg_quadratic`` (defaults: §5.1, Figure 1).

    ``num_clients`` M (32), ``n`` rows per client (10000), ``d_theta`` (100), ``d_w`` (50),
    ``matrices`` (``independent`` | ``zeta``), ``zeta`` ζ (0), ``zeta_H`` (null = ζ), ``zeta_norm``
    (``fro`` | ``spectral``), ``targets`` (``per_client`` | ``shared`` | ``overpersonalized``), ``noise`` ι
    (1e-3), ``noise_quirk`` (false), ``seed`` (42; null = the run seed).
    """

    num_clients: int = option(32, lo=0, lo_open=True)
    n: int = option(10000, lo=0, lo_open=True)
    d_theta: int = option(100, lo=0, lo_open=True)
    d_w: int = option(50, lo=0, lo_open=True)
    matrices: Literal["independent", "zeta"] = "independent"
    zeta: float = option(0.0, lo=0)
    zeta_H: float | None = option(None, lo=0)
    zeta_norm: Literal["fro", "spectral"] = "fro"
    targets: Literal["per_client", "shared", "overpersonalized"] = "per_client"
    noise: float = option(1e-3, lo=0)
    noise_quirk: bool = False
    seed: int | None = option(42, lo=0)

    def check(self, key: str) -> None:
        if self.n < self.d_w:
            raise ConfigError(f"{key}.n", f"n = {self.n} < d_w = {self.d_w}: B_mᵀB_m would be singular")
        if self.targets == "overpersonalized" and self.noise != 0:
            raise ConfigError(f"{key}.noise", "targets: overpersonalized needs noise: 0 (Assumption 2)")
        for name in ("zeta", "zeta_H"):
            if self.matrices == "independent" and getattr(self, name) not in (0, None):
                raise ConfigError(f"{key}.{name}", "applies to matrices: zeta only")


@dataclasses.dataclass
class RawClient:
    """One client's data, ``n`` rows, float64: ``H [n, d_θ]``, ``b [n]``, ``A [n, d_θ]``, ``B [n, d_w]``, ``y [n]``."""

    H: np.ndarray
    b: np.ndarray
    A: np.ndarray
    B: np.ndarray
    y: np.ndarray


def _norm(x: np.ndarray, kind: str) -> float:
    return float(np.linalg.norm(x, 2 if kind == "spectral" else None))


class FFGGQuadratic(Problem):
    """Example 1 with φ_m(θ) = ½‖H_mθ − b_m‖², as Grams (see the module docstring).

    Attributes (``[M, ...]`` tensors on the problem's device and dtype):
        G: H_mᵀH_m + A_mᵀA_m ``[M, d_θ, d_θ]``; HtH: H_mᵀH_m ``[M, d_θ, d_θ]``;
        AtB: A_mᵀB_m ``[M, d_θ, d_w]``; BtB: B_mᵀB_m ``[M, d_w, d_w]``;
        g: H_mᵀb_m + A_mᵀy_m ``[M, d_θ]``; Bty: B_mᵀy_m ``[M, d_w]``; c: ½(‖b_m‖² + ‖y_m‖²) ``[M]``;
        theta_star: the solution of F(θ) = 0 ``[d_θ]`` (θ_true for ``overpersonalized``).

    Raises:
        ValueError: some B_mᵀB_m is not positive definite (w_m^* not unique).
    """

    name = "ffgg_quadratic"
    Options = FFGGQuadraticOptions

    def __init__(self, options: FFGGQuadraticOptions, seed: int, device: torch.device, dtype: torch.dtype):
        super().__init__(options, seed, device, dtype)
        o = options
        self.num_clients, self.d_theta, self.d_w = o.num_clients, o.d_theta, o.d_w
        data_seed = seed if o.seed is None else o.seed
        self._streams = np.random.SeedSequence(int(data_seed)).spawn(o.num_clients + 1)
        self._shared = self._draw_shared()
        grams = [self._grams(self.raw_client(m)) for m in range(o.num_clients)]
        stacked = {k: np.stack([gr[k] for gr in grams]) for k in grams[0]}
        self._f64 = {k: torch.from_numpy(v) for k, v in stacked.items()}  # float64 CPU: the constants
        put = {k: v.to(device=device, dtype=dtype) for k, v in self._f64.items()}
        self.HtH, self.G, self.AtB, self.BtB = put["HtH"], put["G"], put["AtB"], put["BtB"]
        self.g, self.Bty, self.c = put["g"], put["Bty"], put["c"]
        self.BtA = self.AtB.transpose(1, 2).contiguous()
        chol, info = torch.linalg.cholesky_ex(self._f64["BtB"])
        if bool((info != 0).any()):
            raise ValueError("some B_mᵀB_m is not positive definite: w_m^*(θ) is not unique")
        self._chol = chol.to(device=device, dtype=dtype)
        self.theta_star = self._theta_star().to(device=device, dtype=dtype)

    # ---- generation ---------------------------------------------------------------------------

    def _draw_shared(self) -> dict[str, np.ndarray]:
        o, rng = self.options, np.random.default_rng(self._streams[0])
        out: dict[str, np.ndarray] = {}
        if o.matrices == "zeta":
            out["H"] = rng.uniform(size=(o.n, o.d_theta)) / o.d_theta
            out["A"] = rng.uniform(size=(o.n, o.d_theta)) / o.d_theta
            out["B"] = rng.uniform(size=(o.n, o.d_w)) / o.d_w
        if o.targets == "shared":
            out["b1"], out["y1"] = rng.normal(size=o.d_theta), rng.normal(size=o.d_theta)
            out["y2"] = rng.normal(size=o.d_w)
        elif o.targets == "overpersonalized":
            out["theta_true"] = rng.normal(size=o.d_theta)
        return out

    def raw_client(self, m: int) -> RawClient:
        """Client ``m``'s n-row data, regenerated from its stream (the same arrays every call).

        The Grams are computed from exactly these arrays; the reference loops use them directly.
        """
        o, s = self.options, self._shared
        rng = np.random.default_rng(self._streams[m + 1])
        if o.matrices == "independent":
            H = rng.uniform(size=(o.n, o.d_theta)) / o.d_theta
            A = rng.uniform(size=(o.n, o.d_theta)) / o.d_theta
            B = rng.uniform(size=(o.n, o.d_w)) / o.d_w
        else:
            zeta_H = o.zeta if o.zeta_H is None else o.zeta_H
            Hp, Ap = rng.normal(size=(o.n, o.d_theta)), rng.normal(size=(o.n, o.d_theta))
            Bp = rng.normal(size=(o.n, o.d_w))
            H = s["H"] + zeta_H * Hp / _norm(Hp, o.zeta_norm)
            A = s["A"] + o.zeta * Ap / _norm(Ap, o.zeta_norm)
            B = s["B"] + o.zeta * Bp / _norm(Bp, o.zeta_norm)
        if o.targets == "per_client":
            b1, y1, y2 = rng.normal(size=o.d_theta), rng.normal(size=o.d_theta), rng.normal(size=o.d_w)
        elif o.targets == "shared":
            b1, y1, y2 = s["b1"], s["y1"], s["y2"]
        else:
            b1 = y1 = s["theta_true"]
            y2 = rng.normal(size=o.d_w)
        b, y = H @ b1, A @ y1 + B @ y2
        if o.noise:
            size = None if o.noise_quirk else o.n
            loc = float(o.n) if o.noise_quirk else 0.0  # the notebooks' rng.normal(n): one draw of N(n, 1)
            b = b + o.noise * rng.normal(loc, size=size)
            y = y + o.noise * rng.normal(loc, size=size)
        return RawClient(H, b, A, B, y)

    @staticmethod
    def _grams(raw: RawClient) -> dict[str, np.ndarray]:
        X = np.concatenate([raw.A, raw.B], axis=1)
        XtX, d = X.T @ X, raw.A.shape[1]
        HtH = raw.H.T @ raw.H
        return {
            "HtH": HtH,
            "G": HtH + XtX[:d, :d],
            "AtB": XtX[:d, d:],
            "BtB": XtX[d:, d:],
            "g": raw.H.T @ raw.b + raw.A.T @ raw.y,
            "Bty": raw.B.T @ raw.y,
            "c": np.asarray(0.5 * (raw.b @ raw.b + raw.y @ raw.y)),
        }

    # ---- the exact oracle (batched over clients) ---------------------------------------------

    def grad_theta(self, theta: Tensor, w: Tensor, clients: Clients = None) -> Tensor:
        """∇_1 f_m(θ, w) = G_m θ + A_mᵀB_m w − g_m for each client.

        Args:
            theta: ``[d_θ]`` (shared) or ``[C, d_θ]``; w: ``[C, d_w]``.
            clients: ``LongTensor[C]``, a ``slice`` of clients, or None (all M, C = M); see :func:`take`.

        Returns:
            ``[C, d_θ]``.
        """
        G, AtB, g = (take(t, clients) for t in (self.G, self.AtB, self.g))
        return mv(G, theta) + mv(AtB, w) - g

    def grad_w(self, theta: Tensor, w: Tensor, clients: Clients = None) -> Tensor:
        """∇_2 f_m(θ, w) = B_mᵀB_m w + B_mᵀA_m θ − B_mᵀy_m; shapes as :meth:`grad_theta`, returns ``[C, d_w]``."""
        BtB, BtA, Bty = (take(t, clients) for t in (self.BtB, self.BtA, self.Bty))
        return mv(BtB, w) + mv(BtA, theta) - Bty

    def w_rhs(self, theta: Tensor, clients: Clients = None) -> Tensor:
        """The right-hand side B_mᵀ(y_m − A_mθ) of the w-subproblem B_mᵀB_m w = B_mᵀ(y_m − A_mθ): ``[C, d_w]``."""
        BtA, Bty = (take(t, clients) for t in (self.BtA, self.Bty))
        return Bty - mv(BtA, theta)

    def w_star(self, theta: Tensor, clients: Clients = None) -> Tensor:
        """w_m^*(θ) = (B_mᵀB_m)^{-1} B_mᵀ(y_m − A_mθ) (Example 1), by Cholesky: ``[C, d_w]``."""
        rhs = self.w_rhs(theta, clients)
        return torch.cholesky_solve(rhs.unsqueeze(-1), take(self._chol, clients)).squeeze(-1)

    def F_clients(self, theta: Tensor) -> Tensor:
        """F_m(θ) = ∇_1 f_m(θ, w_m^*(θ)) for every client: ``[M, d_θ]``."""
        return self.grad_theta(theta, self.w_star(theta))

    def loss(self, theta: Tensor) -> Tensor:
        """(1/M) Σ_m f_m(θ, w_m^*(θ)), the objective of Theorem 5 (a 0-dim tensor)."""
        w = self.w_star(theta)
        theta_b = theta.expand(self.num_clients, -1)
        quad = (theta_b * mv(self.G, theta)).sum(1) + 2 * (theta_b * mv(self.AtB, w)).sum(1)
        quad = quad + (w * mv(self.BtB, w)).sum(1)
        lin = (theta_b * self.g).sum(1) + (w * self.Bty).sum(1)
        return (0.5 * quad - lin + self.c).mean()

    def joint(self) -> tuple[Tensor, Tensor]:
        """f_m as a quadratic in x = (θ, w): ½xᵀQ_m x − q_mᵀx + c_m. Returns ``Q [M, D, D]``, ``q [M, D]``,
        D = d_θ + d_w (the non-personalized baselines optimize x jointly, one shared w)."""
        top = torch.cat([self.G, self.AtB], 2)
        bottom = torch.cat([self.BtA, self.BtB], 2)
        return torch.cat([top, bottom], 1), torch.cat([self.g, self.Bty], 1)

    # ---- constants (float64, computed once) ---------------------------------------------------

    def _schur64(self) -> Tensor:
        """A_mᵀ(I − B_mB_m^†)A_m = A_mᵀA_m − A_mᵀB_m (B_mᵀB_m)^{-1} B_mᵀA_m ``[M, d_θ, d_θ]`` in float64."""
        f = self._f64
        AtA = f["G"] - f["HtH"]
        return AtA - f["AtB"] @ torch.linalg.solve(f["BtB"], f["AtB"].transpose(1, 2))

    def _theta_star(self) -> Tensor:
        f = self._f64
        if self.options.targets == "overpersonalized":
            return torch.from_numpy(self._shared["theta_true"].copy())
        # F(θ) = Jθ − r with J = mean_m (H_mᵀH_m + S_m), r = mean_m (g_m − A_mᵀB_m (B_mᵀB_m)^{-1} B_mᵀy_m)
        J = (f["HtH"] + self._schur64()).mean(0)
        r = f["g"] - (f["AtB"] @ torch.linalg.solve(f["BtB"], f["Bty"].unsqueeze(-1))).squeeze(-1)
        return torch.linalg.solve(J, r.mean(0))

    @cached_property
    def constants(self) -> dict[str, float]:
        """Smoothness constants, float64 (docs/papers/ffgg.md §2.6):

        - ``L_phi``: max_m λ_max(H_mᵀH_m); ``L_hat``: max_m ‖A_mᵀ(I − B_mB_m^†)A_m‖_2;
        - ``L``: 2·max(L_phi, L_hat), the cocoercivity constant of Example 1 (γ_θ ≤ 1/L in Theorem 1);
        - ``L_code``: the notebooks' ``compute_L``: max(‖A_mᵀ(I − B_mB_m^†)A_m‖_F, λ_max(H_mᵀH_m)) of
          the LAST client only (it returns ``L_max``, not the running max), no factor 2;
        - ``L_w``, ``mu_w``: max_m λ_max and min_m λ_min of B_mᵀB_m (GD on w: γ_w ≤ 1/L_w);
        - ``mu_F``, ``L_F``: λ_min, λ_max of the Jacobian of F (strong monotonicity and Lipschitz constant).

        ``L_f`` (the baselines' smoothness) is a separate property: it needs the joint Hessians.
        """
        f = self._f64
        S = self._schur64()
        eig_H = torch.linalg.eigvalsh(f["HtH"])
        eig_S = torch.linalg.eigvalsh(S)
        eig_B = torch.linalg.eigvalsh(f["BtB"])
        eig_J = torch.linalg.eigvalsh((f["HtH"] + S).mean(0))
        L_phi, L_hat = float(eig_H[:, -1].max()), float(eig_S[:, -1].max())
        last = -1
        return {
            "L_phi": L_phi,
            "L_hat": L_hat,
            "L": 2 * max(L_phi, L_hat),
            "L_code": max(float(torch.linalg.matrix_norm(S[last])), float(eig_H[last, -1])),
            "L_w": float(eig_B[:, -1].max()),
            "mu_w": float(eig_B[:, 0].min()),
            "mu_F": float(eig_J[0]),
            "L_F": float(eig_J[-1]),
        }

    @cached_property
    def L_f(self) -> float:
        """max_m λ_max of the joint Hessian Q_m of f_m in x = (θ, w) (float64): the "L_f" of Section 5.2."""
        f = self._f64
        top = torch.cat([f["G"], f["AtB"]], 2)
        Q = torch.cat([top, torch.cat([f["AtB"].transpose(1, 2), f["BtB"]], 2)], 1)
        return float(torch.linalg.eigvalsh(Q)[:, -1].max())


Clients = Tensor | slice | None
"""Which clients a batched call is about: ``LongTensor[C]``, a ``slice`` (a view, no copy), or None (all)."""


def take(t: Tensor, clients: Clients) -> Tensor:
    """Rows of ``t [M, ...]`` for ``clients`` (see :data:`Clients`): ``[C, ...]``."""
    if clients is None:
        return t
    if isinstance(clients, slice):
        return t[clients]
    return t.index_select(0, clients.to(t.device))


def mv(mats: Tensor, x: Tensor) -> Tensor:
    """Batched matrix-vector product ``mats [C, a, b] @ x`` with ``x [b]`` (shared) or ``[C, b]``: ``[C, a]``.

    Runs through :func:`hetfl.models.linalg.bmm` (OpenBLAS on CPU, ``torch.bmm`` on CUDA).
    """
    if x.dim() == 1:
        C, a, b = mats.shape
        return bmm(mats.reshape(1, C * a, b), x.reshape(1, b, 1)).reshape(C, a)
    return bmm(mats, x.unsqueeze(-1)).squeeze(-1)


PROBLEMS = {"ffgg_quadratic": FFGGQuadratic}
