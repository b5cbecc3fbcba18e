"""The algorithm guide stays true: its worked example is the code of the repository, byte for byte, and every
file it names exists (docs/guides/adding-an-algorithm.md)."""

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
GUIDE = ROOT / "docs/guides/adding-an-algorithm.md"
TEXT = GUIDE.read_text()
FILE_BLOCKS = re.findall(r"\*\*`([^`]+)`\*\*\n\n```\w*\n(.*?)\n```\n", TEXT, flags=re.S)


def test_the_guide_shows_the_three_files_of_its_example():
    assert [path for path, _ in FILE_BLOCKS] == [
        "src/hetfl/algorithms/fairness/qfedavg.py",
        "src/hetfl/reference/qfedavg.py",
        "tests/test_qfedavg.py",
        "mine.yaml",
    ]


@pytest.mark.parametrize("path,code", [block for block in FILE_BLOCKS if block[0] != "mine.yaml"])
def test_a_file_the_guide_shows_is_the_repositorys(path, code):
    assert (ROOT / path).read_text().rstrip("\n") == code, f"{path} differs from its copy in {GUIDE.name}"


def test_every_repository_path_the_guide_names_exists():
    named = set(re.findall(r"`((?:src|tests|docs|config|workflow)/[\w./-]+)`", TEXT))
    named |= set(re.findall(r"\]\(\.\./\.\./([\w./#-]+)\)", TEXT))  # links from docs/guides/
    named |= {f"docs/{p}" for p in re.findall(r"\]\(\.\./(?!\.\./)([\w./#-]+)\)", TEXT)}
    missing = sorted(p for p in named if not (ROOT / p.split("#")[0]).exists())
    assert len(named) > 10 and not missing, missing


def test_the_test_counts_the_guide_states_are_what_pytest_collects():
    """Each ``python -m pytest -q <files> [-k name]`` block the guide follows with "reports `N passed`" collects N
    tests (collection only: what running them reports is the suite's own business)."""
    import subprocess
    import sys

    stated = re.findall(r"```bash\npython -m pytest -q ([^\n]+)\n```\n\nreports `(\d+) passed`", TEXT)
    assert len(stated) == 2, stated
    for args, count in stated:
        out = subprocess.run(
            [sys.executable, "-m", "pytest", "--collect-only", "-q", "-p", "no:cacheprovider", *args.split()],
            cwd=ROOT,
            capture_output=True,
            text=True,
            check=True,
        ).stdout
        collected = re.search(r"(\d+)(?:/\d+)? tests? (?:collected|selected)", out)
        assert collected and collected[1] == count, (args, count, out[-300:])
