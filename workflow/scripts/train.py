"""Stage `train`: one (study, run, seed) on the batched engine, checkpointed as it goes; or, for a job of
`train_jobs: run` (rules train_seeds_*, train_gpu_seeds_*), each seed of one run in turn, in this one process."""

import json
from dataclasses import fields
from pathlib import Path

from hetfl.logs import redirect

log = redirect(snakemake.log[0])

from hetfl.engine.checkpoint import resolve_checkpoint  # noqa: E402
from hetfl.pipeline.train import Checkpointing, RunOutputs, apply_choice, checkpoint_key, train  # noqa: E402

out, inp, wc = snakemake.output, snakemake.input, snakemake.wildcards
study, run = wc.key.split("/", 1) if "key" in wc.keys() else (wc.study, wc.run)
if "seed" in wc.keys():  # one seed: outputs and inputs as rule train names them
    seeds = [int(wc.seed)]
    suffix = lambda seed: ""  # noqa: E731
else:  # a run's job: outputs <file>_<seed>, inputs partition_<seed>, init_<seed>, reference_<seed>
    seeds = list(dict.fromkeys(int(name.rsplit("_", 1)[1]) for name in out.keys()))
    suffix = "_{}".format
FILES = [f.name for f in fields(RunOutputs)]  # the outputs' names, as rule train names them

spec = json.loads(snakemake.params.spec)
if "choice" in inp.keys():  # a tuned run: the hyper-parameters its tuning chose
    with open(inp.choice) as f:
        spec = apply_choice(spec, json.load(f))
policy = resolve_checkpoint(snakemake.config.get("checkpoint"))  # not a param: changing it reruns nothing
for seed in seeds:
    checkpoint = Checkpointing(
        Path(f"results/checkpoints/{study}/{run}/seed={seed}.pt"),
        checkpoint_key(spec, seed, snakemake.params.code),
        policy["every_rounds"],
        policy["every_seconds"],
    )
    info = train(
        spec,
        seed,
        inp.get("data"),  # absent for a generated problem
        inp.get(f"partition{suffix(seed)}"),
        RunOutputs(*(out[f"{name}{suffix(seed)}"] for name in FILES)),
        threads=snakemake.threads,
        log=log,
        init=inp.get(f"init{suffix(seed)}"),  # init_from: the other run's final model
        reference=inp.get(f"reference{suffix(seed)}"),  # reference_from: the other run's final models
        checkpoint=checkpoint,
        # --set-resources train:memory_budget=N
        memory_budget=snakemake.resources.get("memory_budget", "auto"),
    )
    print(
        f"seed {seed}: status {info.status} after {info.rounds_done} rounds, {info.wall_time_s} s "
        f"on {info.device}"
    )
