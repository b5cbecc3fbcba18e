"""The FFGG theory experiments on Example 1 (``problem: ffgg_quadratic``): FFGG with the CG, GD or exact
fine-tuner, its asynchronous (Algorithm 3) and Byzantine-robust (Algorithm 5) versions, and the
baselines of Section 5.2 (Scaffold, Local GD, L2GD), all batched over clients on the per-client Gram
matrices of :mod:`hetfl.problems.ffgg_quadratic`. Every algorithm reports ‖F(θ)‖² (the paper's
criterion), ‖θ − θ^*‖² and its cost (gradients computed, communications); shared pieces (the
fine-tuners, closed-form gradient descent on quadratics, batched CG, stepsize rules, the evaluation)
live in :mod:`hetfl.algorithms.quadratic.common`.
"""
