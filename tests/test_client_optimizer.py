"""The shared client optimizer (momentum, weight decay, clipping, learning-rate schedule): every algorithm
that takes local steps on client data takes it under the same names, every option changes its training,
the options are range-checked, and the defaults change nothing: the models of each algorithm are those of
the code before the optimizer existed (``PRE_CHANGE``).

The equivalence with PyTorch's own optimizer is tested per algorithm in the equivalence tests (cases named
``*-opt-step``, ``*-opt-cosine``, ``*-clip-*``), and the resume with momentum in tests/test_checkpoint.py.
"""

from __future__ import annotations

import dataclasses
import hashlib

import pytest
import torch

from hetfl.algorithms import FEDERATION, get_algorithm, registry
from hetfl.algorithms.hyperparameters import OPTIMIZER_KEYS, ClientOptimization
from hetfl.algorithms.personalized.layers import SPLIT_OF
from hetfl.engine.grad import local_sgd
from hetfl.engine.optim import client_optimizer, scheduled_lr
from hetfl.engine.participation import participation_schedule
from hetfl.errors import ConfigError
from hetfl.testing import tiny_federation

NOT_TAKING = {
    # full-gradient theory algorithms with their own paper-defined local solver: Sharma et al.'s momentum is a
    # variant of the method (buffer reset each round, normalized by ‖ā_i‖₁), lr_milestones its schedule
    "local_sgda",
    "local_sgda_plus",
    "fed_norm_sgda",
    "fed_norm_sgda_plus",
    "minimax_saddle",  # no local steps: the saddle points of the same objective, solved centrally (L-BFGS)
}
NEUTRAL = {
    "momentum": 0.0,
    "weight_decay": 0.0,
    "clip_norm": None,
    "lr_schedule": "constant",
    "lr_step_size": None,
    "lr_gamma": 0.1,
    "lr_min": 0.0,
    "lr_warmup": 0.1,
}


def taking() -> list[str]:
    """Every algorithm on client data that takes the client optimizer."""
    return sorted(n for n, impls in registry().items() if FEDERATION in impls and n not in NOT_TAKING)


def test_every_algorithm_with_local_steps_takes_the_options_under_the_same_names():
    assert set(OPTIMIZER_KEYS) == set(NEUTRAL)
    assert len(taking()) >= 16
    for name in taking():
        cls = get_algorithm(name)
        assert issubclass(cls.Hyperparameters, ClientOptimization), name
        defaults = cls.Hyperparameters.from_dict({}, "t").as_dict()
        assert {k: defaults[k] for k in OPTIMIZER_KEYS} == NEUTRAL, name
    for name in NOT_TAKING:  # said so in config/README.md
        assert not issubclass(get_algorithm(name).Hyperparameters, ClientOptimization)


# --- the defaults change nothing ---------------------------------------------------------------------------

STEPLR = {"momentum": 0.9, "weight_decay": 0.01, "lr_schedule": "step", "lr_step_size": 2, "lr_gamma": 0.5}
GOLDEN_CASES = {  # name -> (algorithm, hyper-parameters, model split): 3 rounds, dnn, seed 3, epoch sampling
    "fedavg": ("fedavg", {"lr": 0.1, "local_steps": 3, "batch_size": 4, "clients_per_round": 2}, "none"),
    "local": ("local", {"lr": 0.2, "local_steps": 3, "batch_size": 4}, "none"),
    "fedavg_ft": (
        "fedavg_ft",
        {"lr": 0.1, "local_steps": 2, "batch_size": 4, "clients_per_round": 3, "finetune_steps": 3},
        "none",
    ),
    "pfedme": (
        "pfedme",
        {
            "lr": 0.05,
            "local_steps": 3,
            "batch_size": 4,
            "clients_per_round": 2,
            "K": 3,
            "personal_lr": 0.05,
            "lam": 5.0,
            "beta": 1.5,
        },
        "none",
    ),
    "perfedavg-hf": (
        "perfedavg",
        {"lr": 0.1, "beta": 0.05, "local_steps": 2, "batch_size": 4, "variant": "hf", "hf_delta": 0.01},
        "none",
    ),
    "perfedavg-sequential-official": (
        "perfedavg",
        {
            "lr": 0.1,
            "beta": 0.05,
            "local_steps": 2,
            "batch_size": 5,
            "step": "sequential",
            "adaptation": "official",
        },
        "none",
    ),
    "ffgg-output": (
        "ffgg",
        {
            "lr_theta": 0.2,
            "lr_w": 0.1,
            "tau": 3,
            "batch_size": 4,
            "clients_per_round": 2,
            "finetune_steps": 2,
        },
        "output",
    ),
    "ffgg-local-theta-steps-input": (
        "ffgg",
        {
            "lr_theta": 0.05,
            "lr_w": 0.1,
            "tau": 2,
            "batch_size": 4,
            "local_theta_steps": 2,
            "server_lr": 0.7,
            "finetune_steps": 2,
        },
        "input",
    ),
    "fedalt-stateful-adapter": (
        "fedalt",
        {
            "lr": 0.1,
            "local_steps": 2,
            "personal_steps": 3,
            "batch_size": 4,
            "clients_per_round": 2,
            "stateful": True,
            "finetune_steps": 2,
        },
        "adapter",
    ),
    "fedsim-output": (
        "fedsim",
        {"lr": 0.1, "local_steps": 2, "batch_size": 4, "clients_per_round": 3, "finetune_steps": 2},
        "output",
    ),
    "all_for_one": ("all_for_one", {"lr": 0.2, "local_steps": 2, "batch_size": 3, "b_alpha": 4}, "none"),
    # the All-for-one family's own optimizer before it was the shared one (momentum, weight decay, StepLR)
    "all_for_one-sgdm": (
        "all_for_one",
        {"lr": 0.1, "local_steps": 3, "batch_size": 4, "b_alpha": 2, "tau": 2, **STEPLR},
        "none",
    ),
    "all_for_one_oracle-sgdm": (
        "all_for_one_oracle",
        {"lr": 0.2, "local_steps": 2, "batch_size": 3, **STEPLR},
        "none",
    ),
    "local_sgdm-sgdm": ("local_sgdm", {"lr": 0.2, "local_steps": 3, "batch_size": 4, **STEPLR}, "none"),
    "fedavg_sgdm-sgdm": ("fedavg_sgdm", {"lr": 0.2, "local_steps": 3, "batch_size": 4, **STEPLR}, "none"),
    "ditto-sgdm": ("ditto", {"lr": 0.1, "local_steps": 2, "batch_size": 3, "lam": 0.5, **STEPLR}, "none"),
    "apfl-sgdm-adaptive": (
        "apfl",
        {"lr": 0.1, "local_steps": 2, "batch_size": 3, "adaptive": True, "mix_lr": 0.5, **STEPLR},
        "none",
    ),
    "cobo-sgdm": (
        "cobo",
        {
            "lr": 0.1,
            "local_steps": 2,
            "batch_size": 3,
            "pair_batch": 4,
            "pair_probability": 1.0,
            "gamma_c": 0.5,
            **STEPLR,
        },
        "none",
    ),
    "wga_bc-sgdm": ("wga_bc", {"lr": 0.1, "local_steps": 2, "batch_size": 3, **STEPLR}, "none"),
}

# Recorded with the code before the client optimizer (commit e95a653: local_sgd's plain steps, the All-for-one
# family's ClientSGD, which took StepLR from lr_step_size alone), torch 2.13.0+cpu, CPU capability AVX2, one
# thread: per case, the SHA-256 of the bytes of every evaluated model (models and parameters in name order)
# and per model the sum, the sum of squares and Σ_j x_j sin(j) of its parameters flattened in name order.
RECORDED_ON = ("2.13.0+cpu", "AVX2")
PRE_CHANGE: dict[str, tuple[str, dict[str, tuple[float, float, float]]]] = {
    "fedavg": (
        "de46e5c77b4e828a8cea468233329d3fee0bcc966bf1713e97855fef5ce1865d",
        {
            "global": (1.9626939193895714, 2.716324869540556, -1.1569755451794825),
            "personal": (1.9626939193895714, 2.716324869540556, -1.1569755451794825),
        },
    ),
    "local": (
        "24343b16d4e45e9fd0ad0e6d10373cfa729434f64c1aea318013d48908463c4c",
        {
            "personal": (8.82423323759679, 14.820362028594563, -2.831318789222476),
        },
    ),
    "fedavg_ft": (
        "cb5b5cba632da4f76e525dbebf20df8be292e7317146ba014db49355a1c7c233",
        {
            "global": (1.8876066515619925, 2.7171152725249104, -0.9536924900311885),
            "personal": (7.609287150267466, 11.06375460389889, -1.7507663937125142),
        },
    ),
    "pfedme": (
        "9e0fb9630874675a91c7123ae14e07429881c3690998c9f7861112591ecc7298",
        {
            "global": (1.9445123110587694, 2.7507886906110706, -1.0342098391683638),
            "local": (7.6482942421516835, 11.034919160226325, -1.5653150683560382),
            "personal": (7.659912461712678, 11.110486218455979, -1.690913971173496),
        },
    ),
    "perfedavg-hf": (
        "0b3ec63e3c9bfc3820ac84d3ccf796a0b347324325f48401133b7edaf6021707",
        {
            "global": (1.9441179401435424, 2.7793098941145264, -1.0635731946604448),
            "personal": (7.866852832218014, 11.120804920094283, -1.4159837349339852),
        },
    ),
    "perfedavg-sequential-official": (
        "e915262c78b406efda5b1473172bb72c42f9a6071c9e8afc99bfbc717592f7c8",
        {
            "global": (1.9413862018646442, 2.77521424135957, -1.0987710686796204),
            "personal": (7.88646938609628, 11.047016039163989, -1.6588016629134539),
        },
    ),
    "ffgg-output": (
        "58caf021230abdcb68509ad61d2d0d5e44c141275af7708d4a8d068fffa95f6c",
        {
            "personal": (7.984076441561285, 12.071795024566526, 0.019000098579806127),
        },
    ),
    "ffgg-local-theta-steps-input": (
        "248f4f852782ec0f139492e8ad0bc60d256da17fe16d2925afac37481cc65152",
        {
            "personal": (-1.6455608385496316, 11.597643916222555, 2.2017552852639497),
        },
    ),
    "fedalt-stateful-adapter": (
        "711191e2b89f4243e2a2645645f406beec30f37d587af57ca75d8f9a8eb2820a",
        {
            "personal": (7.647234403982694, 16.11462811842957, -1.8072776042191698),
        },
    ),
    "fedsim-output": (
        "75431e327e9c57de4cec664f1927d7dc6222125c9fb90237e148c4b78801cb2f",
        {
            "personal": (7.563970929339222, 11.09897496269406, -1.4683563605665433),
        },
    ),
    "all_for_one": (
        "d752b8b0069ff534c73bb06081bd1e1b3ccd847935f506a9148bde80f87316fb",
        {
            "personal": (8.239462646769852, 12.669779489160206, -2.8952451884171455),
        },
    ),
    "all_for_one-sgdm": (
        "d9c41bb92cc97af6ace27d2eab88bb52caf7920c81296f17e45e92f0a0ca90f3",
        {
            "personal": (8.541730896143621, 15.495610304754244, -4.08581847473225),
        },
    ),
    "all_for_one_oracle-sgdm": (
        "6f3ff52780f50229334c6089457ca7810d463b2c85f1ff0b5b48aa7160f3abdd",
        {
            "personal": (8.315888551976464, 14.024614394762553, -2.5446622261515404),
        },
    ),
    "local_sgdm-sgdm": (
        "0cc8c9bc0391a521c5f06ba9ef8ae46bf21fa202b043d83e89bd3d9c4565ac8b",
        {
            "personal": (10.23943200497681, 29.682255711398806, -5.187055584637882),
        },
    ),
    "fedavg_sgdm-sgdm": (
        "ef6059263a320ae7cfbfc9fc50837145484f40ff5918d7e4aa0cd1dd856ffb29",
        {
            "global": (2.734276682868838, 3.6578409522535686, -2.373028259917567),
            "personal": (2.734276682868838, 3.6578409522535686, -2.373028259917567),
        },
    ),
    "ditto-sgdm": (
        "04fd420494c94c9780fad4a87828bb3918208cc352314863aef2a1f3fed647a8",
        {
            "global": (1.9777269289492077, 2.729479404868659, -1.1050668904292786),
            "personal": (8.580033430836231, 12.53286622913032, -2.8166044646349833),
        },
    ),
    "apfl-sgdm-adaptive": (
        "84ba0f71378d2c6acd6db1f6240bd26c270bf243c59e4aacd8a2499e1c42f346",
        {
            "global": (1.9777269289492077, 2.729479404868659, -1.1050668904292786),
            "personal": (7.821886656448655, 10.830595228376788, -1.6763955644090969),
        },
    ),
    "cobo-sgdm": (
        "acc31df3e769d9f9b5f0a35611ecd43e99b5c00de0230e1ee7443425131a8699",
        {
            "personal": (7.906223337773154, 10.966450770731187, -1.4958080847778874),
        },
    ),
    "wga_bc-sgdm": (
        "5eec1aa7eab503244f1970a5814dd55747115d1f26e046e539c55ccc838a52c5",
        {
            "personal": (7.678017723416843, 10.935404596470796, -1.6384291761242236),
        },
    ),
}


# The FedAvg-like options added after the optimizer (unequal local steps, the server optimizer, the order of
# the server's sums): their defaults are FedAvg's, every client `local_steps` and the plain batched average
# (bit for bit: the cases below).
FEDAVG_FAMILY_NEUTRAL = {
    "local_steps_per_client": "equal",
    "local_steps_min": 1,
    "local_steps_unit": "steps",
    "server_optimizer": "sgd",
    "server_lr": 1.0,
    "server_momentum": 0.9,
    "server_beta2": 0.99,
    "server_eps": 1e-3,
    "aggregation": "batched",
}
SAME_AS = {  # case -> the recorded case whose models it must give, byte for byte
    "fedavg-family-defaults-named": "fedavg",
    "fedprox-mu-0": "fedavg",
}
GOLDEN_CASES["fedavg-family-defaults-named"] = (
    "fedavg",
    {**GOLDEN_CASES["fedavg"][1], **FEDAVG_FAMILY_NEUTRAL},
    "none",
)
GOLDEN_CASES["fedprox-mu-0"] = ("fedprox", {**GOLDEN_CASES["fedavg"][1], "mu": 0.0}, "none")


def _train(algorithm: str, hp: dict, split: str, rounds: int = 3, seed: int = 3):
    fed = tiny_federation("dnn", split=split)
    fed.cluster = torch.tensor([0, 1, 0, 1])
    cls = get_algorithm(algorithm)
    alg = cls(fed, cls.Hyperparameters.from_dict(hp, "test"), seed, "epoch")
    alg.rounds = rounds
    schedule = participation_schedule(fed.num_clients, alg.clients_per_round, rounds, seed)
    for t in range(1, rounds + 1):
        alg.round(t, schedule[t - 1])
    return alg


def digest(models: dict) -> tuple[str, dict[str, tuple[float, float, float]]]:
    """The SHA-256 of the models' bytes and each model's (sum, sum of squares, Σ_j x_j sin(j)), float64."""
    sha = hashlib.sha256()
    stats = {}
    for name in sorted(models):
        flat = torch.cat([models[name][k].detach().reshape(-1).double() for k in sorted(models[name])])
        sha.update(flat.numpy().tobytes())
        j = torch.arange(len(flat), dtype=torch.float64)
        stats[name] = (float(flat.sum()), float((flat * flat).sum()), float((flat * torch.sin(j)).sum()))
    return sha.hexdigest(), stats


@pytest.mark.parametrize("algorithm,hp,split", [pytest.param(*c, id=n) for n, c in GOLDEN_CASES.items()])
def test_the_defaults_give_the_models_of_the_code_before_the_optimizer(algorithm, hp, split, request):
    """Byte for byte where the kernels are those of the recording (same torch build and CPU capability);
    elsewhere, where floating-point rounding may differ, the statistics to 1e-12 (relative)."""
    sha, stats = digest(_train(algorithm, hp, split).eval_models())
    case = request.node.callspec.id
    want_sha, want_stats = PRE_CHANGE[SAME_AS.get(case, case)]
    assert stats.keys() == want_stats.keys()
    if (torch.__version__, torch.backends.cpu.get_cpu_capability()) == RECORDED_ON:
        assert sha == want_sha, (stats, want_stats)
    for name, values in stats.items():
        assert values == pytest.approx(want_stats[name], rel=1e-12, abs=1e-12), name


def test_hyperparameters_without_the_new_keys_keep_their_values():
    """``hp.as_dict()`` of a run that names none of the optimizer's keys: the values it had before (those of
    ``GOLDEN_CASES`` and the algorithm's defaults), plus the optimizer's neutral values."""
    for name, (algorithm, hp, _) in GOLDEN_CASES.items():
        cls = get_algorithm(algorithm)
        values = cls.Hyperparameters.from_dict(hp, "t").as_dict()
        defaults = cls.Hyperparameters.from_dict({}, "t").as_dict()
        own = {k: v for k, v in values.items() if k not in OPTIMIZER_KEYS}
        assert own == {k: hp.get(k, defaults[k]) for k in own}, name
        assert {k: values[k] for k in OPTIMIZER_KEYS} == {k: hp.get(k, NEUTRAL[k]) for k in NEUTRAL}, name
    assert get_algorithm("fedavg").Hyperparameters.from_dict({}, "t").as_dict() == {
        "lr": 0.005,
        "local_steps": 20,
        "batch_size": 20,
        "clients_per_round": None,
        "client_weights": "uniform",
        **NEUTRAL,
        **FEDAVG_FAMILY_NEUTRAL,
    }
    assert get_algorithm("ffgg").Hyperparameters.from_dict({}, "t").as_dict() == {
        "batch_size": 20,
        "clients_per_round": None,
        "client_weights": "uniform",
        "finetune_steps": 20,
        "finetune_lr": None,
        "lr_theta": 0.1,
        "lr_w": 0.1,
        "tau": 10,
        "local_theta_steps": 0,
        "personal_init": "random",
        "aggregation": "batched",
        **{k: v for k, v in FEDAVG_FAMILY_NEUTRAL.items() if k.startswith("server_")},
        **NEUTRAL,
    }


# --- every option is used ----------------------------------------------------------------------------------

OPTIONS = {  # name -> settings that must change the models of 2 rounds
    "momentum": {"momentum": 0.5},
    "weight_decay": {"weight_decay": 0.5},
    "clip_norm": {"clip_norm": 1e-3},
    "step": {"lr_schedule": "step", "lr_step_size": 1, "lr_gamma": 0.5},
    "cosine": {"lr_schedule": "cosine", "lr_min": 0.0},
    "linear": {"lr_schedule": "linear"},
}
NEEDS = {  # algorithm -> what it needs beside an option (a linear warm-up's first step size is 0)
    ("qfedavg", "linear"): {"lipschitz": 10.0},
    ("scaffold", "linear"): {"control": "I"},
}


@pytest.mark.parametrize("option", list(OPTIONS))
@pytest.mark.parametrize("algorithm", taking())
def test_every_option_changes_every_algorithms_training(algorithm, option):
    """No algorithm takes an option it ignores: from its defaults (2 local steps where it has local steps),
    each option alone changes a model it evaluates after 2 rounds."""
    cls = get_algorithm(algorithm)
    split = "output" if "lr_w" in cls.Hyperparameters.names() or algorithm in ("fedalt", "fedsim") else "none"
    split = SPLIT_OF[cls.part] if hasattr(cls, "part") else split  # a personal head or body (layers.py)
    base = {"local_steps": 2} if "local_steps" in cls.Hyperparameters.names() else {}
    plain = _train(algorithm, base, split, rounds=2).eval_models()
    extra = NEEDS.get((algorithm, option), {})
    changed = _train(algorithm, {**base, **OPTIONS[option], **extra}, split, rounds=2).eval_models()
    if extra:
        plain = _train(algorithm, {**base, **extra}, split, rounds=2).eval_models()
    assert any(not torch.equal(plain[m][k], changed[m][k]) for m in plain for k in plain[m])


# --- range checks, the run's length, the local_sgd contract ------------------------------------------------


@pytest.mark.parametrize(
    "algorithm,values,key,fragment",
    [
        ("fedavg", {"momentum": 1.0}, "momentum", "[0, 1)"),
        ("qfedavg", {"lr_schedule": "linear"}, "lr_schedule", "L = 1/η_t"),
        ("scaffold", {"lr_schedule": "linear"}, "lr_schedule", "control II"),
        ("fedavg", {"lr_schedule": "linear", "lr_warmup": 1.0}, "lr_warmup", "[0, 1)"),
        ("local", {"momentum": -0.1}, "momentum", "[0, 1)"),
        ("pfedme", {"weight_decay": -1e-4}, "weight_decay", "≥ 0"),
        ("fedalt", {"clip_norm": 0.0}, "clip_norm", "> 0"),
        ("perfedavg", {"lr_schedule": "step"}, "lr_step_size", "needs lr_step_size"),
        ("fedavg_ft", {"lr_step_size": 5}, "lr_step_size", "only taken with lr_schedule: step"),
        ("ditto", {"lr_schedule": "cosine", "lr_step_size": 5}, "lr_step_size", "only taken"),
        ("cobo", {"lr_schedule": "step", "lr_step_size": 0}, "lr_step_size", "> 0"),
        ("local_sgdm", {"lr_gamma": 0.0}, "lr_gamma", "(0, 1]"),
        ("fedsim", {"lr_gamma": 1.5}, "lr_gamma", "(0, 1]"),
        ("wga_bc", {"lr_min": -0.1}, "lr_min", "≥ 0"),
        ("fedavg", {"lr": 0.01, "lr_schedule": "cosine", "lr_min": 0.01}, "lr_min", "below lr"),
        ("ffgg", {"lr_theta": 0.5, "lr_w": 0.05, "lr_min": 0.1}, "lr_min", "below lr_w"),
        ("perfedavg", {"lr": 0.1, "beta": 0.01, "lr_min": 0.05}, "lr_min", "below beta"),
    ],
)
def test_out_of_range_options_name_the_key(algorithm, values, key, fragment):
    with pytest.raises(ConfigError) as err:
        get_algorithm(algorithm).Hyperparameters.from_dict(values, "studies.s.runs.r")
    assert err.value.key == f"studies.s.runs.r.{key}"
    assert fragment in str(err.value)


def test_the_schedule_scales_the_step_sizes_each_algorithm_names():
    hp = get_algorithm("perfedavg").Hyperparameters.from_dict
    assert hp({}, "t").step_sizes() == ("beta",)  # MAML: α is part of the meta-objective
    assert hp({"step": "sequential"}, "t").step_sizes() == ("lr", "beta")
    assert hp({"lr": 0.001, "beta": 0.1, "lr_min": 0.01}, "t").lr_min == 0.01  # α below lr_min: not scheduled
    assert get_algorithm("ffgg").Hyperparameters.from_dict({}, "t").step_sizes() == ("lr_theta", "lr_w")
    assert get_algorithm("fedsim").Hyperparameters.from_dict({}, "t").step_sizes() == ("lr",)


def test_a_cosine_schedule_needs_the_runs_number_of_rounds():
    fed = tiny_federation("mlr")
    cls = get_algorithm("fedavg")
    hp = cls.Hyperparameters.from_dict({"lr": 0.1, "lr_schedule": "cosine", "lr_min": 0.01}, "t")
    alg = cls(fed, hp, 0)
    with pytest.raises(ValueError, match="number of rounds"):
        alg.round(1, torch.arange(4))
    alg.rounds = 4
    assert [scheduled_lr(0.1, t, hp, alg.rounds) for t in (1, 3)] == pytest.approx([0.1, 0.055], abs=1e-15)
    assert scheduled_lr(0.5, 2, hp, alg.rounds) == pytest.approx(0.01 + 0.49 * (1 + 2**-0.5) / 2, abs=1e-15)
    assert scheduled_lr(0.1, 7, dataclasses.replace(hp, lr_schedule="constant"), None) == 0.1  # without T


def test_local_sgd_takes_the_optimizers_keys():
    fed = tiny_federation("dnn", split="output")
    cls = get_algorithm("fedavg")
    alg = cls(fed, cls.Hyperparameters.from_dict({"momentum": 0.9}, "t"), 0)
    params = {k: v.expand(4, *v.shape[1:]).clone() for k, v in alg.w.items()}
    before = {k: v.clone() for k, v in params.items()}
    personal = fed.model.personal_keys()
    opt = client_optimizer(fed, alg.hp, params, personal)
    with pytest.raises(ValueError, match="not the optimizer's"):
        local_sgd(fed, alg.sampler, params, fed.all_clients(), 1, 0.1, keys=list(params), optimizer=opt)
    local_sgd(fed, alg.sampler, params, fed.all_clients(), 2, 0.1, optimizer=opt)
    assert all(torch.equal(params[k], before[k]) == (k not in personal) for k in params)
    assert opt.state_dict().keys() == set(personal)  # momentum buffers [C, ...] of the stepped part only
