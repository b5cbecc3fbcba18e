"""Claims: the check grammar, safe parsing, config errors, and evaluation on seed means and per seed."""

import math
import re

import numpy as np
import pandas as pd
import pytest
from scipy import stats

from hetfl.errors import ConfigError
from hetfl.pipeline.claims import normalize_claims
from hetfl.pipeline.claims_check import check_claims, claims_markdown, paired_interval, seeds_needed

NAN = float("nan")
# run -> {seed: (status, {metric: values at rounds 0, 1, ...})}
DATA = {
    "fedavg": {
        0: ("ok", {"acc": [0.5, 0.8, 0.7]}),
        1: ("ok", {"acc": [0.5, 0.7, 0.6]}),
        2: ("ok", {"acc": [0.5, 0.9, 0.8]}),
    },
    "pfedme": {
        0: ("ok", {"acc": [0.6, 0.75, 0.75]}),
        1: ("ok", {"acc": [0.6, 0.8, 0.8]}),
        2: ("ok", {"acc": [0.6, 0.7, 0.7]}),
    },
    # fedavg plus a small, consistent gain: paired differences 0.01, 0.012, 0.011 (seed std of each run 0.1)
    "steady": {
        0: ("ok", {"acc": [0.5, 0.8, 0.71]}),
        1: ("ok", {"acc": [0.5, 0.7, 0.612]}),
        2: ("ok", {"acc": [0.5, 0.9, 0.811]}),
    },
    "two_a": {0: ("ok", {"acc": [0.5, 0.6]}), 1: ("ok", {"acc": [0.5, 0.7]})},
    "two_b": {0: ("ok", {"acc": [0.5, 0.5]}), 1: ("ok", {"acc": [0.5, 0.55]})},
    "lam=1.5": {0: ("ok", {"loss": [1.0, 0.3]})},
    "lam=3": {0: ("ok", {"loss": [1.0, 0.2]})},
    "lam=6": {0: ("ok", {"loss": [1.0, 0.1]})},
    "dead": {0: ("diverged", {"acc": [0.5, NAN]})},
}
RUNS = list(DATA)
METRICS = {"acc", "loss"}


@pytest.fixture(scope="module")
def tables():
    rows, status = [], []
    for run, seeds in DATA.items():
        for seed, (state, series) in seeds.items():
            status.append(
                {
                    "study": "s",
                    "run": run,
                    "algorithm": run,
                    "seed": seed,
                    "status": state,
                    "diverged_round": 1 if state == "diverged" else None,
                    "wall_time_s": 1.0,
                }
            )
            rows += [
                {
                    "study": "s",
                    "run": run,
                    "algorithm": run,
                    "seed": seed,
                    "round": r,
                    "metric": m,
                    "value": v,
                }
                for m, values in series.items()
                for r, v in enumerate(values)
            ]
    return pd.DataFrame(rows), pd.DataFrame(status)


def check(tables, *claims):
    return check_claims(normalize_claims(list(claims), RUNS, METRICS, "studies.s.claims"), *tables)


def one(tables, claim):
    return check(tables, claim).iloc[0]


def test_normalize_shorthand_and_dict():
    given = {"id": "C9", "text": "PM wins", "check": "best(acc[pfedme]) > 0", "at": "best"}
    claims = ["  pfedme.acc > fedavg.acc ", given, {"check": "acc[lam=1.5] > 0"}]
    out = normalize_claims(claims, RUNS, METRICS, "k")
    text = "pfedme.acc > fedavg.acc"
    assert out[0] == {"id": "C1", "text": text, "check": text, "at": "final"}
    assert out[1] == {"id": "C9", "text": "PM wins", "check": "best(acc[pfedme]) > 0", "at": "best"}
    assert out[2]["id"] == "C3"


def test_both_operand_forms_and_per_seed_count(tables):
    dotted = one(tables, "pfedme.acc > fedavg.acc")
    bracket = one(tables, "acc[pfedme] > acc[fedavg]")
    for row in (dotted, bracket):
        assert row["holds"] == "yes"  # means 0.75 > 0.7
        assert row["seeds_holding"] == "2/3"  # seed 2: 0.7 < 0.8
        assert row["margin"] == pytest.approx(0.05)
        assert row["comparisons"] == "0.75 > 0.7"
    assert "acc[pfedme]@final = 0.75 ± 0.05 (n=3)" in dotted["operands"]


def test_default_statistic_follows_at(tables):
    claims = normalize_claims(
        [
            {"check": "pfedme.acc > fedavg.acc", "at": "best"},
            {"check": "pfedme.acc >= fedavg.acc", "at": "last2"},
            {"check": "pfedme.acc < fedavg.acc", "at": "round=1"},
        ],
        RUNS,
        METRICS,
        "k",
    )
    out = check_claims(claims, *tables)
    assert out["holds"].tolist() == ["no", "yes", "yes"]  # best 0.75 vs 0.8; last2 0.75 vs 0.75; round 1
    assert out["comparisons"][0] == "0.75 > 0.8"


def test_functions_and_arithmetic(tables):
    out = check(
        tables,
        "best(pfedme.acc) < best(fedavg.acc) - 0.04",  # 0.75 < 0.76
        "at(fedavg.acc, 1) > last(acc[pfedme], 2) + 0.04",  # 0.8 > 0.79
        "2 * fedavg.acc / (1 + 1) < pfedme.acc",
        "-final(fedavg.acc) < -0.69",
        "pfedme.acc - fedavg.acc > 0.06",
    )
    assert out["holds"].tolist() == ["yes", "yes", "yes", "yes", "no"]
    assert out["margin"][4] == pytest.approx(-0.01)


def test_seed_range_is_the_extreme_over_seeds_for_every_seed(tables):
    # fedavg's final values per seed: 0.7, 0.6, 0.8; at round 1: 0.8, 0.7, 0.9
    inside = one(tables, "seedmin(fedavg.acc) <= 0.65 <= seedmax(fedavg.acc)")
    assert inside["holds"] == "yes" and inside["seeds_holding"] == "3/3"
    assert inside["comparisons"] == "0.6 <= 0.65; 0.65 <= 0.8"
    outside = one(tables, "seedmin(at(fedavg.acc, 1)) <= 0.65")
    assert outside["holds"] == "no" and outside["seeds_holding"] == "0/3"
    assert "seedmin(acc[fedavg]@round=1) = 0.7" in outside["operands"]
    best = one(tables, "seedmax(best(acc[pfedme])) > 0.79")  # best per seed 0.75, 0.8, 0.7
    assert best["holds"] == "yes"
    assert one(tables, "seedmax(dead.acc) > 0")["holds"] == "undetermined"  # no finite seed


def test_min_and_max_on_the_means_and_per_seed(tables):
    # final values per seed: fedavg 0.7, 0.6, 0.8; pfedme 0.75, 0.8, 0.7; steady 0.71, 0.612, 0.811
    low = one(tables, "min(pfedme.acc, fedavg.acc) < 0.71")  # on the means: min(0.75, 0.7)
    assert low["holds"] == "yes" and low["comparisons"] == "0.7 < 0.71"
    assert low["seeds_holding"] == "3/3"  # per seed: 0.7, 0.6, 0.7
    high = one(tables, "max(pfedme.acc, fedavg.acc, acc[steady]) > 0.76")  # max(0.75, 0.7, 0.711)
    assert high["holds"] == "no" and high["seeds_holding"] == "2/3"  # per seed: 0.75, 0.8, 0.811
    paired = one(tables, "min(pfedme.acc, steady.acc) > fedavg.acc - 0.1")  # per seed 0.71, 0.612, 0.7
    assert paired["n_paired"] == 3 and paired["diff_mean"] == pytest.approx((0.11 + 0.112 + 0.0) / 3)
    assert one(tables, "max(dead.acc, fedavg.acc) > 0")["holds"] == "undetermined"  # a missing side


@pytest.mark.parametrize("text", ["min(fedavg.acc) > 0", "max() > 0", "min(fedavg.acc, steady.acc, k=1) > 0"])
def test_min_and_max_take_two_or_more_expressions(text):
    with pytest.raises(ConfigError, match="two or more expressions"):
        normalize_claims([text], RUNS, METRICS, "studies.s.claims")


@pytest.mark.parametrize(
    "text",
    ["seedmin(seedmax(fedavg.acc)) > 0", "seedmin(fedavg.acc, 1) > 0", "seedmin(fedavg.acc + 1) > 0"],
)
def test_seed_range_takes_one_operand_or_statistic(text):
    with pytest.raises(ConfigError, match="studies.s.claims\\[0\\].check"):
        normalize_claims([text], RUNS, METRICS, "studies.s.claims")


def test_chained_comparison_needs_every_pair(tables):
    monotone = one(tables, "loss[lam=6] < loss[lam=3] < loss[lam=1.5]")
    assert monotone["holds"] == "yes" and monotone["seeds_holding"] == "1/1"
    assert monotone["comparisons"] == "0.1 < 0.2; 0.2 < 0.3"
    broken = one(tables, "loss[lam=3] < loss[lam=6] < loss[lam=1.5]")
    assert broken["holds"] == "no" and broken["margin"] == pytest.approx(-0.1)


def test_comparisons_joined_by_and_all_hold(tables):
    both = one(tables, "pfedme.acc > 0.7 and fedavg.acc > 0.6")
    assert both["holds"] == "yes" and both["comparisons"] == "0.75 > 0.7; 0.7 > 0.6"
    one_fails = one(tables, "pfedme.acc > 0.7 and fedavg.acc > 0.75")
    assert one_fails["holds"] == "no" and one_fails["margin"] == pytest.approx(-0.05)
    assert one(tables, "pfedme.acc > 0 and dead.acc > 0")["holds"] == "undetermined"


def test_diverged_run_is_undetermined(tables):
    row = one(tables, "dead.acc > fedavg.acc")
    assert row["holds"] == "undetermined" and math.isnan(row["margin"])
    assert row["seeds_holding"] == "0/3 (3 undetermined)"  # seed 0 diverged; dead has no seeds 1, 2
    assert "acc[dead]@final = nan (n=0 of 3)" in row["operands"]
    assert one(tables, "diverged(dead.acc) >= 1")["holds"] == "yes"
    assert one(tables, "at(fedavg.acc, 50) > 0")["holds"] == "undetermined"  # round never evaluated


@pytest.mark.parametrize(
    "text, message",
    [
        ("__import__('os').system('ls') > 0", "is not allowed"),
        ("__import__('os') > 0", "function '__import__' is not allowed"),
        ("open('x') > 0", "function 'open' is not allowed"),
        ("().__class__ > 0", "Attribute"),
        ("fedavg.acc.__class__ > 0", "Attribute"),
        ("(lambda: 1)() > 0", "not allowed"),
        ("fedavg.acc if 1 else 0 > 0", "comparison"),
        ("fedavg.acc > 'a'", "Constant"),
        ("fedavg.acc ** 2 > 0", "BinOp"),
        ("fedavg.acc == 1", "allowed: <, <=, >, >="),
        ("fedavg.acc", "must be a comparison"),
        ("fedavg.acc > 1 or 1 > 0", "must be a comparison"),
        ("fedavg.acc > 1 and 2", "must be a comparison"),
        ("fedavg.acc >", "cannot parse"),
        ("x > 1", "unknown name 'x'"),
        ("_op0 > 1", "reserved"),
        ("best(fedavg.acc - 1) > 0", "must be an operand"),
        ("last(fedavg.acc, 0) > 0", "integer >= 1"),
        ("last(fedavg.acc, 1.5) > 0", "integer >= 1"),
        ("best(fedavg.acc, k=1) > 0", "takes an operand"),
        ("True > fedavg.acc", "Constant"),
        ("1" + " + 1" * 300 + " > 0", "at most 500 characters"),
    ],
)
def test_rejected_checks_name_the_key(text, message):
    with pytest.raises(ConfigError, match="studies.s.claims\\[1\\].check") as err:
        normalize_claims(["pfedme.acc > 0", text], RUNS, METRICS, "studies.s.claims")
    assert message in str(err.value)


def test_unknown_run_and_metric_list_the_allowed():
    with pytest.raises(ConfigError, match=r"unknown run 'lam-9'.*allowed: dead, fedavg, lam=1.5"):
        normalize_claims(["loss[lam-9] < 1"], RUNS, METRICS, "k")
    with pytest.raises(ConfigError, match=r"k\[0\].check.*unknown metric 'test_acc'.*allowed: acc, loss"):
        normalize_claims(["fedavg.test_acc > 0"], RUNS, METRICS, "k")


def test_bad_entries():
    with pytest.raises(ConfigError, match=r"k\[0\].at.*allowed: best, final, last<k>, round=<n>"):
        normalize_claims([{"check": "fedavg.acc > 0", "at": "median"}], RUNS, METRICS, "k")
    with pytest.raises(ConfigError, match=r"k\[1\].id.*duplicate"):
        normalize_claims(
            [{"id": "A", "check": "fedavg.acc > 0"}, {"id": "A", "check": "fedavg.acc > 0"}],
            RUNS,
            METRICS,
            "k",
        )
    with pytest.raises(
        ConfigError, match=r"k\[0\]\.tol': unknown option for a claim; allowed: at, check, id, text"
    ):
        normalize_claims([{"check": "fedavg.acc > 0", "tol": 1}], RUNS, METRICS, "k")
    with pytest.raises(ConfigError, match=r"k\[0\].check"):
        normalize_claims([{"text": "no check"}], RUNS, METRICS, "k")


def t_interval(diffs):
    """The 95 % Student t interval of a mean, from its textbook formula."""
    diffs = np.asarray(diffs, float)
    half = stats.t.ppf(0.975, len(diffs) - 1) * diffs.std(ddof=1) / math.sqrt(len(diffs))
    return diffs.mean() - half, diffs.mean() + half


def test_paired_difference_within_noise(tables):
    # pfedme - fedavg per seed: 0.05, 0.2, -0.1: holds on the means (0.75 > 0.7), but the interval spans 0
    row = one(tables, "pfedme.acc > fedavg.acc")
    assert row["holds"] == "yes" and row["status"] == "undecided (holds on the means)"
    low, high = t_interval([0.05, 0.2, -0.1])
    assert row["diff_mean"] == pytest.approx(0.05) and row["n_paired"] == 3
    assert (row["diff_ci_low"], row["diff_ci_high"]) == (pytest.approx(low), pytest.approx(high))
    assert row["diff_ci_low"] < 0 < row["diff_ci_high"]
    assert f"[{low:+.4g}, {high:+.4g}] (n=3)" in row["intervals"]
    # the seeds that a mean of 0.05 with this spread would need: the first n whose t interval clears 0
    n, sd = int(row["seeds_needed"]), np.std([0.05, 0.2, -0.1], ddof=1)
    assert (
        stats.t.ppf(0.975, n - 1) * sd / math.sqrt(n)
        < 0.05
        <= stats.t.ppf(0.975, n - 2) * sd / math.sqrt(n - 1)
    )


def test_paired_difference_outside_noise(tables):
    # steady - fedavg per seed: 0.01, 0.012, 0.011. Each run's values spread over 0.2 across seeds, so
    # unpaired intervals of the two means would overlap; paired by seed the gain is clear
    row = one(tables, "steady.acc > fedavg.acc")
    low, high = t_interval([0.01, 0.012, 0.011])
    assert row["status"] == "holds" and row["diff_mean"] == pytest.approx(0.011)
    assert (row["diff_ci_low"], row["diff_ci_high"]) == (pytest.approx(low), pytest.approx(high))
    assert 0 < low
    # '<' is oriented too: the difference is rhs - lhs, positive on the claimed side
    flipped = one(tables, "fedavg.acc < steady.acc")
    assert flipped["status"] == "holds" and flipped["diff_mean"] == pytest.approx(0.011)
    wrong = one(tables, "steady.acc < fedavg.acc")
    assert wrong["status"] == "does not hold" and wrong["diff_ci_high"] == pytest.approx(-low)


def test_one_sample_against_a_constant(tables):
    # fedavg's final values 0.7, 0.6, 0.8 against 0.65: the one-sample interval of (x - 0.65)
    row = one(tables, "fedavg.acc > 0.65")
    low, high = t_interval([0.05, -0.05, 0.15])
    assert row["status"] == "undecided (holds on the means)"
    assert (row["diff_ci_low"], row["diff_ci_high"]) == (pytest.approx(low), pytest.approx(high))
    assert one(tables, "fedavg.acc > 0.4")["status"] == "holds"
    # fails on the means (0.7 < 0.75) but the interval straddles: undecided, not a failure
    fails = one(tables, "fedavg.acc > 0.75")
    assert fails["holds"] == "no" and fails["status"] == "undecided (fails on the means)"
    assert fails["seeds_needed"] > 3
    decided = one(tables, "fedavg.acc > 0.95")  # 0.7, 0.6, 0.8: every seed far below
    assert decided["status"] == "does not hold" and math.isnan(decided["seeds_needed"])


def test_seed_ranges_are_constants_without_an_interval(tables):
    row = one(tables, "seedmin(fedavg.acc) <= 0.65 <= seedmax(fedavg.acc)")
    assert row["status"] == "holds"
    assert math.isnan(row["diff_ci_low"]) and "constant across seeds" in row["intervals"]
    assert one(tables, "seedmin(fedavg.acc) > 0.65")["status"] == "does not hold"


def test_fewer_than_three_seeds_say_so(tables):
    two = one(tables, "two_a.acc > two_b.acc")  # differences 0.1, 0.15: no interval on 2 seeds
    assert two["holds"] == "yes" and two["status"] == "holds (2 seeds: no interval)"
    assert two["n_paired"] == 2 and math.isnan(two["diff_ci_low"]) and "no interval" in two["intervals"]
    assert one(tables, "two_a.acc < two_b.acc")["status"] == "does not hold (2 seeds: no interval)"
    single = one(tables, "loss[lam=6] < loss[lam=3] < loss[lam=1.5]")
    assert single["status"] == "holds (1 seed: no interval)"


def test_chains_and_conjunctions_need_every_interval(tables):
    both = one(tables, "steady.acc > fedavg.acc and steady.acc > 0.4")
    assert both["status"] == "holds"
    mixed = one(tables, "steady.acc > fedavg.acc and pfedme.acc > fedavg.acc")
    assert mixed["holds"] == "yes" and mixed["status"] == "undecided (holds on the means)"
    assert mixed["diff_ci_low"] < 0  # the reported interval is the pair closest to failing
    assert len(mixed["intervals"].split("; ")) == 2
    chain = one(tables, "fedavg.acc < steady.acc < 0.99")
    assert chain["status"] == "holds" and chain["comparisons"] == "0.7 < 0.711; 0.711 < 0.99"
    row = one(tables, "dead.acc > fedavg.acc")
    assert row["status"] == "undetermined"


def test_paired_interval_pairs_by_seed_and_skips_missing():
    lhs, rhs = np.array([1.0, 2.0, np.nan, 4.0, 5.0]), np.array([0.5, 1.4, 3.0, 3.6, np.nan])
    out = paired_interval(">", lhs, rhs)
    assert out["n"] == 3 and out["mean"] == pytest.approx(0.5)  # seeds 0, 1, 3: 0.5, 0.6, 0.4
    assert (out["low"], out["high"]) == tuple(pytest.approx(x) for x in t_interval([0.5, 0.6, 0.4]))
    assert out["kind"] == "clear"
    same = paired_interval(">=", np.array([1.0, 1.0, 1.0]), 1.0)
    assert same["kind"] == "clear" and same["low"] == same["high"] == 0  # no spread: a point interval
    assert paired_interval(">", np.array([1.0, 1.0, 1.0]), 1.0)["kind"] == "against"  # 1 > 1: fails
    assert paired_interval("<", np.array([1.0, 2.0, 3.0]), 2.5)["kind"] == "noise"
    assert paired_interval("<", np.array([3.0, 3.1, 3.2]), 2.5)["kind"] == "against"


def test_seeds_needed_projects_the_observed_effect_and_spread():
    """The fewest seeds whose t interval of the observed mean difference and sd clears 0, either way."""
    for mean, sd in ((0.05, 0.15), (-0.02, 0.01), (1.0, 0.1)):
        n = int(seeds_needed({"mean": mean, "sd": sd, "kind": "noise"}))
        half = [stats.t.ppf(0.975, k - 1) * sd / math.sqrt(k) for k in range(3, n + 1)]
        assert half[-1] < abs(mean) and all(h >= abs(mean) for h in half[:-1])
    assert seeds_needed({"mean": 0.0, "sd": 0.1, "kind": "noise"}) == math.inf
    assert seeds_needed({"mean": 1e-9, "sd": 1.0, "kind": "noise"}) == math.inf  # beyond MAX_SEEDS_NEEDED
    assert math.isnan(seeds_needed({"mean": 0.1, "sd": math.nan, "kind": "few"}))
    assert math.isnan(seeds_needed({"mean": 0.1, "sd": 0.0, "kind": "exact"}))


def test_markdown(tables):
    md = claims_markdown(check(tables, {"id": "C1", "text": "PM | GM", "check": "pfedme.acc > fedavg.acc"}))
    assert md.startswith("| id")
    assert "PM \\| GM" in md and "| yes " in md and "2/3" in md
    assert "| undecided (holds on the means) " in md and "paired difference [95 % CI]" in md.splitlines()[0]
    assert "seeds to decide" in md.splitlines()[0]
    assert "- C1: acc[pfedme]@final = 0.75" in md


# --- statistics over clients: client_mean, client_std, worst10 ---------------------------------------------

# run -> seed -> {round: test accuracies of 10 clients}; q1 narrows the spread of q0 and lifts its worst client
SPREAD = np.linspace(-0.3, 0.3, 10)
CLIENT_DATA = {
    "q0": {s: {1: 0.6 + SPREAD, 2: 0.7 + SPREAD + 0.01 * s} for s in range(3)},
    "q1": {s: {1: 0.6 + SPREAD / 2, 2: 0.69 + SPREAD / 2 + 0.01 * s} for s in range(3)},
}


@pytest.fixture(scope="module")
def client_tables():
    from hetfl.pipeline.aggregate import client_round_stats

    long, status, clients = [], [], []
    for run, seeds in CLIENT_DATA.items():
        for seed, rounds in seeds.items():
            status.append({"study": "s", "run": run, "algorithm": "qfedavg", "seed": seed, "status": "ok"})
            for r, values in rounds.items():
                long.append({"study": "s", "run": run, "seed": seed, "round": r, "metric": "test_acc_global",
                             "value": values.mean()})  # fmt: skip
                clients += [{"run": run, "seed": seed, "round": r, "client": c, "metric": "test_acc_global",
                             "value": v} for c, v in enumerate(values)]  # fmt: skip
    status = pd.DataFrame(status)
    return pd.DataFrame(long), status, client_round_stats(pd.DataFrame(clients), status)


def check_clients(client_tables, *claims):
    metrics = {"test_acc_global", "train_acc_global"}
    return check_claims(normalize_claims(list(claims), list(CLIENT_DATA), metrics, "c"), *client_tables)


def test_claims_over_clients_with_their_paired_intervals(client_tables):
    got = check_clients(
        client_tables,
        "client_std(test_acc_global[q1]) < client_std(test_acc_global[q0])",
        "worst10(q1.test_acc_global) > worst10(q0.test_acc_global)",
        "client_mean(q1.test_acc_global) > client_mean(q0.test_acc_global) - 0.02",
        "worst10(at(q1.test_acc_global, 1)) > worst10(at(q0.test_acc_global, 1)) + 0.149",
        "seedmax(worst10(q0.test_acc_global)) < seedmin(worst10(q1.test_acc_global))",
        "worst10(last(q1.test_acc_global, 2)) > 0.45",
    )
    assert list(got["holds"]) == ["yes"] * 6
    assert list(got["status"][:4]) == ["holds"] * 4 and got.loc[5, "status"] == "holds"
    std = got.iloc[0]
    assert std["comparisons"] == f"{SPREAD.std() / 2:.4g} < {SPREAD.std():.4g}" and std["n_paired"] == 3
    assert "client_std(test_acc_global[q1]@final)" in std["operands"]
    assert got.iloc[1]["diff_mean"] == pytest.approx(0.15 - 0.01)  # worst 10 %: 1 client of 10
    # the mean over rounds 1 and 2 of the worst client: (0.45 + 0.54 + 0.01 s) / 2, 0.5 over the seeds
    assert got.iloc[5]["comparisons"] == "0.5 > 0.45"


def test_a_claim_over_clients_without_the_clients_table_is_undetermined(client_tables):
    long, status, _ = client_tables
    claims = normalize_claims(["worst10(q1.test_acc_global) > 0"], ["q1"], {"test_acc_global"}, "c")
    assert check_claims(claims, long, status)["holds"].item() == "undetermined"


@pytest.mark.parametrize(
    "check,message",
    [
        ("worst10(q1.train_acc_global) > 0", "worst10() needs a metric recorded per client"),
        ("worst10(diverged(q1.test_acc_global)) > 0", "not diverged()"),
        ("worst10(seedmin(q1.test_acc_global)) > 0", "'seedmin' is not allowed inside worst10()"),
        ("client_std(worst10(q1.test_acc_global)) > 0", "'worst10' is not allowed inside client_std()"),
        ("worst10(q1.test_acc_global, 3) > 0", "worst10() takes one operand or statistic"),
        ("worst10(1) > 0", "must be an operand or a statistic call"),
        (
            "clients_std(q1.test_acc_global) > 0",
            "allowed: at, best, client_mean, client_std, diverged, final, last, max, min, seedmax, seedmin, worst10",
        ),  # fmt: skip
    ],
)
def test_bad_claims_over_clients_name_the_key(check, message):
    with pytest.raises(ConfigError, match=re.escape(message)) as err:
        normalize_claims([check], ["q1"], {"test_acc_global", "train_acc_global"}, "c")
    assert err.value.key == "c[0].check"
