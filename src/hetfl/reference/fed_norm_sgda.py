"""Fed-Norm-SGDA(+), sequential reference (Algorithm 1), one client after the other.

The clients' local SGDA is the loop of ``hetfl.reference.local_sgda``; the server rule is written
here: x ← x − γ_s τ_eff Σ_{i∈C} (p_i n/|C|) (x − x_i)/‖ā_i‖₁, y likewise.
"""

from __future__ import annotations

from hetfl.reference.local_sgda import run_reference


def fed_norm_sgda(env, hp, seed, schedule, sampling="epoch", plus=False, game=False):
    """Fed-Norm-SGDA(+): yields ``{"x", "y"}`` after each round."""

    def server(state, y, locals_, p, n, tau_eff, work):
        if hp.tau_eff == "participants":
            tau_eff = sum(float(p[c]) * n / len(locals_) * a for c, _, _, a in locals_)
        elif hp.tau_eff == "expected":
            expected = work.expected_a_l1(hp.momentum)
            tau_eff = sum(float(p[j]) * float(expected[j]) for j in range(n))
        new_state = {k: v.clone() for k, v in state.items()}
        new_y = y.clone()
        for c, xs, ys, a in locals_:
            w = hp.server_lr * tau_eff * float(p[c]) * n / len(locals_) / a
            for k in state:
                new_state[k] = new_state[k] - w * (state[k] - xs[k])
            new_y = new_y + w * (ys - y)
        return new_state, new_y

    return run_reference(env, hp, seed, schedule, server, plus, sampling, game)
