"""The default suite's studies live in one file per paper (``config/studies/``), which ``config/config.yaml``
lists as ``study_files``; ``hetfl.pipeline.config.load_config`` / ``expand_study_files`` load them under the config's
own ``studies`` (which win, key by key), for the workflow and every other reader of config files."""

from __future__ import annotations

import pytest
import yaml

from hetfl.errors import ConfigError
from hetfl.pipeline.config import build_suite, expand_study_files, load_config
from tests.quadratic_helpers import TINY
from tests.workflow_repo import REPO, copy_repo, planned, snakemake

STUDY = {
    "problem": {"name": "ffgg_quadratic", **TINY},
    "rounds": 2,
    "seeds": [0],
    "runs": {"ffgg": {"algorithm": "ffgg"}},
}


def write(path, data) -> str:
    path.write_text(yaml.safe_dump(data))
    return path.name


def test_the_default_suite_is_the_union_of_its_per_paper_files_each_study_defined_once():
    entry = yaml.safe_load((REPO / "config/config.yaml").read_text())
    files = entry["study_files"]
    assert "studies" not in entry  # every default study lives in a per-paper file
    assert sorted(files) == sorted(
        f"config/studies/{p.name}" for p in (REPO / "config/studies").glob("*.yaml")
    )
    per_file = {f: yaml.safe_load((REPO / f).read_text())["studies"] for f in files}
    names = [name for studies in per_file.values() for name in studies]
    assert len(names) == len(set(names)), "a study is defined in two files"
    loaded = load_config([REPO / "config/config.yaml"], root=REPO)
    assert list(loaded["studies"]) == names
    for studies in per_file.values():
        assert all(loaded["studies"][name] == spec for name, spec in studies.items())
    suite = build_suite(loaded)
    assert sorted(suite.studies) == sorted(names) and sorted(suite.selected) == sorted(names)


@pytest.mark.parametrize(
    ("name", "prefixes"),
    [
        ("pfedme", ("pfedme_",)),
        ("ffgg", ("ffgg_",)),
        ("fedminimax", ("minimax_",)),
        ("all_for_one", ("collab_",)),
        ("baselines", ("baselines_",)),
        ("qfedavg", ("qfedavg_",)),
    ],
)
def test_each_paper_file_holds_that_papers_studies(name, prefixes):
    studies = yaml.safe_load((REPO / f"config/studies/{name}.yaml").read_text())["studies"]
    assert studies and all(study.startswith(prefixes) for study in studies)


def test_a_later_config_file_overrides_a_listed_study_key_by_key_or_adds_one(tmp_path):
    write(tmp_path / "a.yaml", {"studies": {"s": STUDY}})
    write(tmp_path / "entry.yaml", {"study_files": ["a.yaml"], "select": ["s"]})
    write(tmp_path / "mine.yaml", {"studies": {"s": {"rounds": 5}, "t": STUDY}})
    config = load_config([tmp_path / "entry.yaml", tmp_path / "mine.yaml"], root=tmp_path)
    assert config["studies"] == {"s": {**STUDY, "rounds": 5}, "t": STUDY}
    assert build_suite(config).studies["s"].rounds == 5
    alone = load_config([tmp_path / "mine.yaml"], root=tmp_path)  # no study_files: mine.yaml's studies only
    assert alone["studies"] == {"s": {"rounds": 5}, "t": STUDY}


def test_expanding_twice_changes_nothing_and_a_config_without_study_files_is_returned_as_is(tmp_path):
    write(tmp_path / "a.yaml", {"studies": {"s": STUDY}})
    config = expand_study_files({"study_files": ["a.yaml"]}, tmp_path)
    assert expand_study_files(config, tmp_path) == config
    plain = {"studies": {"s": STUDY}}
    assert expand_study_files(plain) is plain


@pytest.mark.parametrize(
    ("files", "key", "message"),
    [
        ({}, "study_files[1]", "no such study file: missing.yaml"),
        ({"b.yaml": "studies: [\n"}, "study_files[1]", "b.yaml is not valid YAML"),
        (
            {"b.yaml": {"studies": {"t": STUDY}, "select": ["t"]}},
            "study_files[1]",
            "'studies' (name -> study)",
        ),
        ({"b.yaml": {"studies": ["t"]}}, "study_files[1]", "and nothing else"),
        ({"b.yaml": {"studies": {"s": STUDY}}}, "studies.s", "defined in two study files: a.yaml and b.yaml"),
        ({"a.yaml": {"studies": {"s": STUDY}}}, "study_files[1]", "a.yaml is listed twice"),
    ],
)
def test_a_bad_study_file_is_a_config_error_naming_it(tmp_path, files, key, message):
    write(tmp_path / "a.yaml", {"studies": {"s": STUDY}})
    for name, content in files.items():
        (tmp_path / name).write_text(content if isinstance(content, str) else yaml.safe_dump(content))
    second = next(iter(files), "missing.yaml")
    with pytest.raises(ConfigError) as err:
        expand_study_files({"study_files": ["a.yaml", second]}, tmp_path)
    assert err.value.key == key and message in err.value.message


def test_study_files_must_be_a_list_and_unloaded_files_are_named():
    with pytest.raises(ConfigError, match="expected a list of YAML file paths"):
        expand_study_files({"study_files": "config/studies/pfedme.yaml"})
    with pytest.raises(ConfigError, match="study_files are not loaded"):
        build_suite(yaml.safe_load((REPO / "config/config.yaml").read_text()))


def test_the_schema_takes_study_files():
    from snakemake.utils import validate

    config = load_config([REPO / "config/config.yaml"], root=REPO)
    validate(config, schema=str(REPO / "workflow/schemas/config.schema.yaml"))
    with pytest.raises(Exception, match="study_files"):
        validate({**config, "study_files": [1]}, schema=str(REPO / "workflow/schemas/config.schema.yaml"))


def test_the_workflow_loads_the_study_files_and_merges_a_later_configfile_over_them(tmp_path):
    repo = copy_repo(tmp_path / "repo", {"study_files": ["config/studies/a.yaml"]})
    (repo / "config/studies").mkdir()
    write(repo / "config/studies/a.yaml", {"studies": {"s": STUDY}})
    trains = {(w["study"], w["run"]) for rule, w in planned(repo) if rule == "train"}
    assert trains == {("s", "ffgg")}
    write(repo / "mine.yaml", {"studies": {"s": {"runs": {"gd": {"algorithm": "local_gd"}}}}})
    trains = {
        (w["study"], w["run"])
        for rule, w in planned(repo, "--configfile", "config/config.yaml", "mine.yaml")
        if rule == "train"
    }
    assert trains == {("s", "ffgg"), ("s", "gd")}  # a dry run plans every job: nothing has run
    write(repo / "config/studies/a.yaml", {"studies": {"s": STUDY}, "select": ["s"]})
    proc = snakemake(repo, "-n", check=False)
    assert proc.returncode != 0 and "study_files[0]" in proc.stdout + proc.stderr


def test_a_study_extends_another_merged_key_by_key_and_extends_is_resolved_away(tmp_path):
    write(tmp_path / "a.yaml", {"studies": {"s": {**STUDY, "runs": {"ffgg": {"algorithm": "ffgg"}}}}})
    write(tmp_path / "entry.yaml", {"study_files": ["a.yaml"], "select": ["t", "u"]})
    write(
        tmp_path / "mine.yaml",
        {
            "studies": {
                "t": {
                    "extends": "s",
                    "rounds": 5,
                    "problem": {"noise": 0.5},
                    "runs": {"b": {"algorithm": "ffgg"}},
                },
                "u": {"extends": "t", "seeds": [0, 1]},
            }
        },
    )
    config = load_config([tmp_path / "entry.yaml", tmp_path / "mine.yaml"], root=tmp_path)
    t, u = config["studies"]["t"], config["studies"]["u"]
    assert "extends" not in t and "extends" not in u
    assert t["rounds"] == 5 and t["problem"] == {**STUDY["problem"], "noise": 0.5}  # nested: merged
    assert sorted(t["runs"]) == ["b", "ffgg"] and t["seeds"] == STUDY["seeds"]
    assert u == {**t, "seeds": [0, 1]}  # a chain
    assert config["studies"]["s"] == STUDY  # the extended study is untouched
    assert expand_study_files(config, tmp_path) == config
    suite = build_suite(config)
    assert sorted(suite.selected) == ["t", "u"] and suite.studies["u"].seeds == [0, 1]
    direct = {"studies": {"s": STUDY, "t": {"extends": "s", "rounds": 7}}}
    assert build_suite(direct).studies["t"].rounds == 7  # build_suite resolves it too


@pytest.mark.parametrize(
    ("studies", "key", "message"),
    [
        (
            {"t": {"extends": "nope"}},
            "studies.t.extends",
            "expected the name of a study, got 'nope'; studies: s, t",
        ),
        ({"t": {"extends": ["s"]}}, "studies.t.extends", "expected the name of a study"),
        ({"t": {"extends": "t"}}, "studies.t.extends", "in a cycle: t -> t"),
        ({"t": {"extends": "u"}, "u": {"extends": "t"}}, "studies.u.extends", "in a cycle: t -> u -> t"),
    ],
)
def test_a_bad_extends_is_a_config_error_naming_it(studies, key, message):
    with pytest.raises(ConfigError) as err:
        expand_study_files({"studies": {"s": STUDY, **studies}})
    assert err.value.key == key and message in err.value.message


@pytest.fixture(scope="module")
def paper_cpu_suite():
    """The suite of ``config/paper.yaml`` + ``config/paper_cpu.yaml``, as the README combines them."""
    return build_suite(load_config([REPO / "config/paper.yaml", REPO / "config/paper_cpu.yaml"], root=REPO))


def test_the_cpu_paper_suites_fashion_mnist_minimax_studies_are_the_default_ones_on_other_data(
    paper_cpu_suite,
):
    suite = paper_cpu_suite
    for name, base in (("minimax_fmnist_robust", "minimax_robust"), ("minimax_fmnist_fair", "minimax_fair")):
        study, default = suite.studies[name], suite.studies[base]
        assert name in suite.selected and base not in suite.selected
        assert study.dataset["name"] == "fashion_mnist" and len(study.seeds) >= 5
        assert study.partition["alpha"] == 0.1 and study.partition["clients"] == 15
        assert sorted(study.runs) == sorted(default.runs) and study.claims == default.claims
        assert all(study.runs[r].hyperparameters == default.runs[r].hyperparameters for r in study.runs)


@pytest.mark.parametrize(
    "overlays",
    [[], ["paper.yaml"], ["paper.yaml", "paper_cpu.yaml"], ["paper.yaml", "paper_tf32.yaml"],
     ["paper.yaml", "paper_cpu_collab_epoch1.yaml"]],
    ids=lambda files: "+".join(files) or "config.yaml",
)  # fmt: skip
def test_every_shipped_config_resolves_as_the_readme_combines_them(overlays):
    """Each ``--configfile`` combination the docs give resolves whole (every study, run, figure and claim),
    so an overlay that cuts a study's rounds cannot leave a figure or claim past them."""
    config = load_config([REPO / "config" / name for name in ["config.yaml", *overlays]], root=REPO)
    suite = build_suite(config)
    assert suite.selected and set(suite.selected) <= set(suite.studies)


def test_the_cpu_paper_suites_full_mnist_all_for_one_study_is_collab_mnist_in_the_papers_proportions(
    paper_cpu_suite,
):
    """``collab_mnist_full`` is the default suite's ``collab_mnist`` (runs, tuning, claims) on the 70,000 MNIST
    images, with the paper's I = 175 iterations an epoch, b_alpha = 512 and so tau = 50 iterations."""
    from hetfl.algorithms import get_algorithm

    suite = paper_cpu_suite
    study, default = suite.studies["collab_mnist_full"], suite.studies["collab_mnist"]
    assert "collab_mnist_full" in suite.selected and "collab_mnist" not in suite.selected
    assert study.dataset["name"] == "mnist" and default.dataset["name"] == "mnist5k"
    assert study.partition == default.partition and study.seeds == default.seeds
    assert sorted(study.runs) == sorted(default.runs) and study.claims == default.claims
    for label, run in study.runs.items():
        hp = run.hyperparameters
        assert hp["local_steps"] == 175 and hp["lr"] == default.runs[label].hyperparameters["lr"]
        assert run.tune == default.runs[label].tune
    a41 = study.runs["a41_bin"].hyperparameters
    assert (
        a41["b_alpha"] == 512 and a41["tau_epochs"] == default.runs["a41_bin"].hyperparameters["tau_epochs"]
    )
    hp = get_algorithm("all_for_one").Hyperparameters.from_dict(a41, "k")
    assert hp.period() == 50  # the paper's weights every 50 of its 175 iterations


def test_the_cifar10_stand_ins_keep_the_papers_proportions(paper_cpu_suite):
    """``collab_cifar_standin`` (default suite) and ``collab_cifar_standin_full`` (CPU paper suite) keep CIFAR-10's
    proportions (All-for-one, Table S1: I = 150 iterations of 2,880 or 1,920 training images, weights every 50
    of them, b_alpha = 512 = 17.8% of an even client's training images) on Fashion-MNIST at two scales."""
    from hetfl.algorithms import get_algorithm
    from hetfl.data import dataset_info

    suite = paper_cpu_suite
    full, default = suite.studies["collab_cifar_standin_full"], suite.studies["collab_cifar_standin"]
    assert "collab_cifar_standin_full" in suite.selected and "collab_cifar_standin" not in suite.selected
    assert sorted(full.runs) == sorted(default.runs) and full.claims == default.claims
    for study, images, iterations, period in ((default, 6000, 15, 5), (full, 70000, 175, 58)):
        assert study.dataset["source"] == "fashion_mnist"
        assert dataset_info(study.dataset).num_samples == images
        train = images * 6 // 10 // 10 * 4 // 5  # an even client's training images (labels 0-5 of 10)
        hp = study.runs["a41_bin"].hyperparameters
        assert hp["local_steps"] == iterations == int((train + train * 2 // 3) / 2 / 16)
        assert abs(hp["b_alpha"] / train - 512 / 2880) < 0.002
        assert get_algorithm("all_for_one").Hyperparameters.from_dict(hp, "k").period() == period
        assert abs(period / iterations - 50 / 150) < 0.01
        assert (hp["momentum"], hp["weight_decay"], hp["batch_size"]) == (0.9, 0.0005, 16)


def test_the_gldv2_stand_in_pretrains_on_a_public_part_its_users_never_hold():
    """``ffgg_landmarks`` (default suite): the run ``public`` trains on the dataset's public users only, every
    other run on its users only, the federation's FedAvg starts from the public model and Local from a random
    start (``local_public``: from the public model); the output split is a large share of the CNN, as
    ResNet-18's for GLDv2's 2,028 landmarks (about 8.5 %), the input split a small one."""
    from hetfl.data import dataset_info
    from hetfl.tools.split_shares import split_share

    suite = build_suite(load_config([REPO / "config" / "config.yaml"], root=REPO))
    study = suite.studies["ffgg_landmarks"]
    info, users = dataset_info(study.dataset), study.dataset["users"]
    assert info.num_users == users + study.dataset["public_users"]
    ranges = {}
    for label in study.runs:
        part = study.spec(label).partition
        assert part["scheme"] == "natural_range"
        ranges[label] = range(part["first"], part["first"] + part["clients"])
    assert study.partition["test_fraction"] == 0.5  # half of each user's photos held out, as in GLDv2
    assert ranges.pop("public") == range(users, info.num_users)
    assert set(ranges.values()) == {range(0, users)}
    init = {label: study.spec(label).settings["init_from"] for label in study.runs}
    assert init["public"] is None and init["pretrain"] == "public" and init["local"] is None
    assert (
        init["local_public"] == "public"
        and init["fedavg"] == "pretrain"
        and init["ffgg_adapter"] == "pretrain"
    )
    shares = {}
    for label in ("ffgg_input", "ffgg_output", "ffgg_adapter"):
        total, personal = split_share(
            study.spec(label).settings["model"], info.sample_shape, info.num_classes
        )
        shares[label] = personal / total
    assert shares["ffgg_input"] < 0.01 and 0.05 < shares["ffgg_output"] < 0.2 and shares["ffgg_adapter"] < 0.1
