"""All-for-one: iterations per second of the batched implementation against a per-pair loop.

All-for-one costs N² gradients a step (every client k computes a gradient at every model θ_i) plus, every τ
steps, N² more on b_α samples for the weights. The batched implementation (``hetfl.algorithms.collaborative``)
does the N² weight-estimation gradients as one call with C = N² rows and the update as one backward per model
over the union of its collaborators' batches; the per-pair loop is the sequential reference
(``hetfl.reference.all_for_one``: one ``nn.Module`` per client, one backward per pair, torch's SGD), the way
the paper's code computes them. Both run the studies' settings (same data, initial model, minibatches) on one
torch thread, and the benchmark checks they end on the same models.

    python benchmarks/all_for_one.py                      # collab_synth_d10 and collab_mnist, target >= 20x
    python benchmarks/all_for_one.py --studies collab_synth_d2 --rounds 3
    python benchmarks/all_for_one.py --device cuda        # both on a GPU (timings synchronize the device)

Prints, per study: iterations per second of each and the ratio; the weight estimation alone (N² gradients)
and the update alone are timed too.
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

import torch

from hetfl.algorithms import get_algorithm
from hetfl.data import load_dataset, make_partition
from hetfl.engine.federation import Federation
from hetfl.engine.participation import participation_schedule
from hetfl.models import build_model
from hetfl.pipeline.config import build_suite, load_config
from hetfl.pipeline.train import pick_device
from hetfl.reference.all_for_one import all_for_one as reference

ROOT = Path(__file__).resolve().parents[1]
TARGET = 20.0


def federation(study, root: Path, device: torch.device) -> Federation:
    """The study's federation for its first seed (dataset and partition built in ``root``), on ``device``."""
    data = load_dataset(study.dataset, root)
    part = make_partition(study.partition, data, study.partition_seed(study.seeds[0]))
    spec = study.runs["a41_bin"].settings
    model = build_model(spec["model"], data.sample_shape, data.num_outputs, data.task)
    return Federation.from_partition(data, part, model, device, getattr(torch, spec["dtype"]))


def timed(fn, repeat: int = 1) -> float:
    """Seconds per call of ``fn`` (mean of ``repeat``), the CUDA queue drained before and after."""
    sync = torch.cuda.synchronize if torch.cuda.is_initialized() else lambda: None
    sync()
    start = time.perf_counter()
    for _ in range(repeat):
        fn()
    sync()
    return (time.perf_counter() - start) / repeat


def bench(study, rounds: int, ref_rounds: int, root: Path, device: torch.device) -> dict:
    fed = federation(study, root, device)
    spec = study.runs["a41_bin"]
    cls = get_algorithm(spec.algorithm)
    hp = cls.Hyperparameters.from_dict(spec.hyperparameters, "bench")
    seed, steps = study.seeds[0], hp.local_steps
    schedule = participation_schedule(fed.num_clients, fed.num_clients, max(rounds, ref_rounds), seed)

    batched = cls(fed, hp, seed, spec.settings["sampling"])
    t_batched = timed(lambda: [batched.round(t, schedule[t - 1]) for t in range(1, ref_rounds + 1)])
    loop, outs = reference(fed, hp, seed, schedule, spec.settings["sampling"]), []
    t_loop = timed(lambda: outs.extend(next(loop) for _ in range(ref_rounds)))
    check = max(
        float((batched.theta[k][i] - state[k]).abs().max())
        for i, state in enumerate(outs[-1]["personal"])
        for k in state
    )
    extra = rounds - ref_rounds  # more batched rounds for a steadier rate
    if extra > 0:
        t_more = timed(lambda: [batched.round(t, schedule[t - 1]) for t in range(ref_rounds + 1, rounds + 1)])
        rate_batched = (ref_rounds + extra) * steps / (t_batched + t_more)
    else:
        rate_batched = ref_rounds * steps / t_batched
    rate_loop = ref_rounds * steps / t_loop

    est_batched = timed(batched.estimate, 3)
    return {
        "study": study.name,
        "N": fed.num_clients,
        "model": f"{spec.settings['model']['name']} ({fed.model.num_parameters()} parameters)",
        "tau": hp.period(),
        "batched_it_s": rate_batched,
        "loop_it_s": rate_loop,
        "ratio": rate_batched / rate_loop,
        "estimate_batched_s": est_batched,
        "max_abs_diff": check,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--studies", nargs="+", default=["collab_synth_d10", "collab_mnist"])
    parser.add_argument("--rounds", type=int, default=None, help="batched rounds (default: per study)")
    parser.add_argument("--config", default=str(ROOT / "config/config.yaml"))
    parser.add_argument("--device", default="cpu", choices=["cpu", "cuda", "auto"])
    args = parser.parse_args()
    device = pick_device(args.device)
    torch.set_num_threads(1)
    suite = build_suite(load_config([args.config], root=ROOT))
    # (batched rounds, reference rounds): enough iterations for a few weight recomputations
    plan = {"collab_synth_d2": (100, 20), "collab_synth_d10": (100, 20), "collab_mnist": (5, 1)}
    rows = []
    with tempfile.TemporaryDirectory() as root:
        for name in args.studies:
            rounds, ref_rounds = plan.get(name, (3, 1))
            if args.rounds:
                rounds = max(args.rounds, ref_rounds)
            row = bench(suite.studies[name], rounds, ref_rounds, Path(root), device)
            rows.append(row)
            print(
                f"{row['study']} on {device}: N = {row['N']}, {row['model']}, weights every {row['tau']} iterations\n"
                f"  batched   {row['batched_it_s']:9.2f} iterations/s\n"
                f"  per-pair  {row['loop_it_s']:9.2f} iterations/s\n"
                f"  ratio     {row['ratio']:9.1f}x (target >= {TARGET:.0f}x: {'met' if row['ratio'] >= TARGET else 'NOT met'})\n"
                f"  one weight estimation (N^2 gradients), batched: {row['estimate_batched_s'] * 1e3:.1f} ms\n"
                f"  same models as the loop: max |diff| = {row['max_abs_diff']:.2e}",
                flush=True,
            )


if __name__ == "__main__":
    main()
