"""The documentation stays true: its links resolve, and the files, modules and commands it names exist.

Checked files: ``README.md``, ``docs/**/*.md``, ``config/README.md`` and ``profiles/**/README.md``.

**Links** (every file). Each relative link ``[text](target)``, image ``![alt](target)`` or reference
definition ``[id]: target`` outside code must name a file or folder of the repository, and its
``#anchor`` (or a bare ``#anchor`` within the same file) one of the target Markdown file's anchors as
GitHub makes them: each heading's text (ATX ``#`` or setext, code spans' contents kept, link and emphasis
markup dropped) lowercased, every character removed that is not a letter, mark or number of any script
(α, τ, é stay), ``-``, ``_`` or a space (so ``.``, ``(``, ``,``, ``—`` go), spaces turned into ``-``;
a repeated slug gets ``-1``, ``-2``, ... in order (github-slugger); ``<a name=...>``/``id=...`` anchors
count too. Links with a scheme (``https:``, ``mailto:``) are not fetched: the test runs offline.

**Commands** (every file, in code blocks and code spans): ``python -m hetfl.<module>`` must name a module
of ``src/`` and ``python -m <other>`` an importable one; ``python|bash <path>`` with ``<path>`` under one
of the repository's folders (``benchmarks/``, ``tests/``, ...) an existing file.

**Paths and names** (every file; written for the guides, ``docs/guides/*.md``, whose worked examples must
run as written): a code span that is a repository path (``src/hetfl/...py``, ``tests/...py``,
``config/...yaml``, ``benchmarks/...``, ``workflow/...``, ``docs/...``, ``profiles/...``; a glob such as
``docs/papers/*.md`` must match something, ``{a,b}`` each of its choices; a ``<name>`` placeholder is a
pattern, not checked), the repository paths in shell code blocks, and the ``hetfl.`` modules (and the name
after the module, which its source must define or import) in code spans and in ``from hetfl... import``
lines must exist. Except what the reader is told to **create**. The guides' convention for a new file: a
paragraph that is only the file's path as a bold code span, ``**`path`**``, followed by a code block with
the file's content. Those paths, and the ``hetfl`` modules they define, belong to the worked example and
are not looked for. A bold path with more words (``**`tests/test_checkpoint.py` (append to ...)**``) names
an existing file to edit, and is checked.
"""

from __future__ import annotations

import functools
import importlib.util
import re
import unicodedata
from pathlib import Path
from urllib.parse import unquote

import pytest

ROOT = Path(__file__).resolve().parents[1]
SRC = ROOT / "src"
REPO_DIRS = ("src", "tests", "config", "benchmarks", "workflow", "docs", "profiles")


def doc_files() -> list[Path]:
    files = [ROOT / "README.md", ROOT / "config/README.md"]
    files += sorted((ROOT / "docs").rglob("*.md")) + sorted((ROOT / "profiles").rglob("README.md"))
    return [f for f in files if f.is_file()]


# ---------------------------------------------------------------------------------------------- parsing

FENCE = re.compile(r"^ {0,3}(`{3,}|~{3,})(.*)$")
CODE_SPAN = re.compile(r"(`+)(.+?)(?<!`)\1(?!`)", re.S)


def split_blocks(text: str) -> tuple[list[tuple[int, str]], list[tuple[int, str, str]]]:
    """(prose lines as (line number, text), fenced code blocks as (first line number, info, content))."""
    prose, blocks = [], []
    fence = None
    for number, line in enumerate(text.splitlines(), 1):
        match = FENCE.match(line)
        if fence is None:
            if match:
                fence, info, body, start = match.group(1), match.group(2).strip(), [], number + 1
            else:
                prose.append((number, line))
        elif (
            match
            and match.group(1)[0] == fence[0]
            and len(match.group(1)) >= len(fence)
            and not match.group(2).strip()
        ):
            blocks.append((start, info, "\n".join(body)))
            fence = None
        else:
            body.append(line)
    if fence is not None:
        blocks.append((start, info, "\n".join(body)))
    return prose, blocks


def slug(heading: str) -> str:
    """GitHub's anchor for a heading's rendered text (github-slugger, before de-duplication)."""
    kept = [c for c in heading.lower() if c in "-_ " or unicodedata.category(c)[0] in "LMN"]
    return "".join(kept).replace(" ", "-")


def heading_text(source: str) -> str:
    """A heading's rendered text: code spans' contents as they are, links' text, no emphasis markers."""
    parts, last = [], 0
    for match in CODE_SPAN.finditer(source):
        parts.append(_inline_text(source[last : match.start()]))
        parts.append(match.group(2).strip())
        last = match.end()
    parts.append(_inline_text(source[last:]))
    return "".join(parts).strip()


def _inline_text(source: str) -> str:
    source = re.sub(r"!?\[([^\]]*)\]\([^)]*\)", r"\1", source)  # links and images: their text
    source = re.sub(r"<[^>]+>", "", source)  # inline HTML
    source = source.replace("*", "")
    return re.sub(r"(?<![\w])_+([^_]+?)_+(?![\w])", r"\1", source)  # _emphasis_, not snake_case


@functools.cache
def anchors(path: Path) -> frozenset[str]:
    """The anchors of a Markdown file: its headings' slugs, de-duplicated as GitHub does, and HTML anchors."""
    prose, _ = split_blocks(path.read_text(encoding="utf-8"))
    found: set[str] = set()
    occurrences: dict[str, int] = {}
    previous: tuple[int, str] | None = None
    headings = []
    for number, line in prose:
        atx = re.match(r"^ {0,3}#{1,6}(?:\s+(.*?))?\s*$", line)
        if atx:
            headings.append(re.sub(r"\s+#+\s*$", "", atx.group(1) or ""))
        elif (
            re.match(r"^ {0,3}(=+|-+)\s*$", line)
            and previous
            and previous[0] == number - 1
            and previous[1].strip()
            and not re.match(r"^ {0,3}([-*+>|]|\d+[.)])", previous[1])
        ):
            headings.append(previous[1].strip())
        found.update(re.findall(r"""<a\s+(?:name|id)=["']([^"']+)["']""", line))
        previous = (number, line)
    for heading in headings:
        base = result = slug(heading_text(heading))
        while result in occurrences:  # github-slugger: foo, foo-1, foo-2, ...
            occurrences[base] += 1
            result = f"{base}-{occurrences[base]}"
        occurrences[result] = 0
        found.add(result)
    return frozenset(found)


LINK = re.compile(
    r"!?\[(?:[^\[\]]|\[[^\]]*\])*\]\(\s*(<[^>]*>|[^\s)]+(?:\([^\s)]*\)[^\s)]*)*)(?:\s+[\"'(][^)]*)?\)"
)
REFERENCE = re.compile(r"^ {0,3}\[[^\]]+\]:\s*(<[^>]*>|\S+)")


def links(path: Path) -> list[tuple[int, str]]:
    prose, _ = split_blocks(path.read_text(encoding="utf-8"))
    text = "\n".join(line for _, line in prose)
    numbers = [number for number, _ in prose]
    found = []
    masked = CODE_SPAN.sub(lambda m: re.sub(r"[^\n]", " ", m.group(0)), text)  # no links inside code
    for match in LINK.finditer(masked):
        found.append((numbers[masked.count("\n", 0, match.start())], match.group(1).strip("<>")))
    for index, line in enumerate(masked.split("\n")):
        match = REFERENCE.match(line)
        if match:
            found.append((numbers[index], match.group(1).strip("<>")))
    return found


def link_problem(path: Path, target: str, root: Path = ROOT) -> str | None:
    if re.match(r"^[a-zA-Z][a-zA-Z0-9+.-]*:", target):
        return None  # https:, mailto:: not fetched
    file_part, _, fragment = target.partition("#")
    file_part, fragment = unquote(file_part), unquote(fragment)
    resolved = (path.parent / file_part).resolve() if file_part else path
    if file_part.startswith("/"):
        return "an absolute path: make it relative"
    if not resolved.is_relative_to(root) or not resolved.exists():
        return f"no such file: {file_part}"
    if fragment and resolved.suffix == ".md" and fragment not in anchors(resolved):
        return f"no heading with the anchor #{fragment} in {resolved.relative_to(root)}"
    return None


# ------------------------------------------------------------------------------------ modules and paths


def module_file(name: str) -> Path | None:
    """The file of module ``name`` under ``src/`` (a package's ``__init__.py``), or None."""
    base = SRC.joinpath(*name.split("."))
    for candidate in (base.with_suffix(".py"), base / "__init__.py"):
        if candidate.is_file():
            return candidate
    return None


def module_of_path(relative: str) -> str | None:
    if relative.startswith("src/") and relative.endswith(".py"):
        return relative[len("src/") : -len(".py")].replace("/", ".").removesuffix(".__init__")
    return None


def dotted_problem(dotted: str, created_modules: set[str]) -> str | None:
    """``hetfl.a.b`` names a module of src/, or a module and a name it defines or imports."""
    parts = dotted.split(".")
    for cut in range(len(parts), 0, -1):
        module = ".".join(parts[:cut])
        if module in created_modules:
            return None
        found = module_file(module)
        if found:
            rest = parts[cut:]
            if rest and not re.search(rf"\b{re.escape(rest[0])}\b", found.read_text(encoding="utf-8")):
                return f"{module} ({found.relative_to(ROOT)}) has no {rest[0]}"
            return None
    return f"no module {dotted} under src/"


def path_problem(relative: str, created: set[str]) -> str | None:
    relative = re.sub(r"(::\S*|:\d+(-\d+)?)$", "", relative.rstrip("/.,;:"))
    if relative in created or "<" in relative or "…" in relative or "..." in relative:
        return None
    braces = re.search(r"\{([^{}]*,[^{}]*)\}", relative)
    if braces:  # src/x/{a,b}.py: each of them
        for choice in braces.group(1).split(","):
            problem = path_problem(relative[: braces.start()] + choice + relative[braces.end() :], created)
            if problem:
                return problem
        return None
    if any(c in relative for c in "*?["):
        return None if list(ROOT.glob(relative)) else f"nothing matches {relative}"
    return None if (ROOT / relative).exists() else f"no such file: {relative}"


REPO_PATH = re.compile(rf"^(?:{'|'.join(REPO_DIRS)})/[^\s`'\"]*$")
PYTHON_M = re.compile(r"\bpython3?\s+(?:-[a-zA-Z]+\s+)*-m\s+([A-Za-z_][\w.]*)")
RUN_FILE = re.compile(rf"\b(?:python3?|bash|sh)\s+((?:{'|'.join(REPO_DIRS)})/\S+)")


def command_problems(text: str, created: set[str]) -> list[str]:
    problems = []
    for module in PYTHON_M.findall(text):
        if module.split(".")[0] == "hetfl":
            if not module_file(module) and module not in {module_of_path(c) for c in created}:
                problems.append(f"python -m {module}: no module {module} under src/")
        elif importlib.util.find_spec(module.split(".")[0]) is None:
            problems.append(f"python -m {module}: not importable")
    for file in RUN_FILE.findall(text):
        problem = path_problem(file, created)
        if problem:
            problems.append(f"{file}: {problem}")
    return problems


def created_paths(path: Path) -> set[str]:
    """The files a guide has its reader create: a paragraph that is only ``**`path`**``, then a code block."""
    lines = path.read_text(encoding="utf-8").splitlines()
    created = set()
    for index, line in enumerate(lines):
        match = re.fullmatch(r"\*\*`([^`]+)`\*\*\s*", line)
        if match:
            following = next((later for later in lines[index + 1 :] if later.strip()), "")
            if FENCE.match(following):
                created.add(match.group(1))
    return created


def named_problems(path: Path) -> list[str]:
    created = created_paths(path)
    created_modules = {m for m in map(module_of_path, created) if m}
    text = path.read_text(encoding="utf-8")
    prose, blocks = split_blocks(text)
    problems = []
    for number, line in prose:
        for match in CODE_SPAN.finditer(line):
            span = match.group(2).strip()
            if REPO_PATH.match(span):
                problem = path_problem(span, created)
                if problem:
                    problems.append(f"line {number}: `{span}`: {problem}")
            elif re.fullmatch(r"hetfl(\.\w+)+", span):
                problem = dotted_problem(span, created_modules)
                if problem:
                    problems.append(f"line {number}: `{span}`: {problem}")
    for start, info, body in blocks:
        language = info.split()[0] if info else ""
        if language in ("bash", "sh", "shell", "console"):
            for word in re.findall(r"(?<![\w/=-])((?:" + "|".join(REPO_DIRS) + r")/[^\s'\";|&)]+)", body):
                problem = path_problem(word, created)
                if problem:
                    problems.append(f"code block at line {start}: {word}: {problem}")
        if language in ("python", "bash", "sh", "shell", "console", "py"):
            for module, names in re.findall(r"^\s*from\s+(hetfl[\w.]*)\s+import\s+\(?([\w, ]+)", body, re.M):
                for name in [n.split(" as ")[0].strip() for n in names.split(",") if n.strip()]:
                    problem = dotted_problem(f"{module}.{name}", created_modules)
                    if problem:
                        problems.append(f"code block at line {start}: from {module} import {name}: {problem}")
            for module in re.findall(r"^\s*import\s+(hetfl[\w.]*)", body, re.M):
                problem = dotted_problem(module, created_modules)
                if problem:
                    problems.append(f"code block at line {start}: import {module}: {problem}")
    return problems


# ------------------------------------------------------------------------------------------------ tests


@pytest.mark.parametrize("path", doc_files(), ids=lambda p: str(p.relative_to(ROOT)))
def test_links_and_anchors_resolve(path):
    problems = [
        f"line {n}: ({target}) {why}" for n, target in links(path) if (why := link_problem(path, target))
    ]
    assert not problems, f"{path.relative_to(ROOT)}:\n" + "\n".join(problems)


@pytest.mark.parametrize("path", doc_files(), ids=lambda p: str(p.relative_to(ROOT)))
def test_commands_name_existing_modules_and_files(path):
    created = created_paths(path)
    text = path.read_text(encoding="utf-8")
    spans = "\n".join(m.group(2) for m in CODE_SPAN.finditer(text))
    problems = sorted(set(command_problems(text, created) + command_problems(spans, created)))
    assert not problems, f"{path.relative_to(ROOT)}:\n" + "\n".join(problems)


@pytest.mark.parametrize("path", doc_files(), ids=lambda p: str(p.relative_to(ROOT)))
def test_named_paths_and_modules_exist(path):
    problems = named_problems(path)
    assert not problems, f"{path.relative_to(ROOT)}:\n" + "\n".join(problems)


@pytest.mark.parametrize(
    "heading, anchor",
    [
        ("4.1 Synthetic(α, β) — dataset `synthetic`", "41-syntheticα-β--dataset-synthetic"),
        ("Tuning on validation data (`runs.<label>.tune`)", "tuning-on-validation-data-runslabeltune"),
        ("What `snakemake --cores all` produces", "what-snakemake---cores-all-produces"),
        ("FFGG τ and **bold** [a link](x.md), snake_case", "ffgg-τ-and-bold-a-link-snake_case"),
    ],
)
def test_slugs_follow_githubs_rules(heading, anchor):
    """The slug rules above, on headings like the docs' own (code spans, Greek letters, em dashes)."""
    assert slug(heading_text(heading)) == anchor


def test_the_checker_finds_what_is_wrong(tmp_path):
    """Duplicate and setext headings, code blocks, and a guide's created, existing and missing names."""
    page = tmp_path / "page.md"
    page.write_text("# Faults\n\n## Faults\n\nSetext\n---\n\n```\n# not a heading\n```\n## Faults-1\n")
    assert anchors(page) == {"faults", "faults-1", "setext", "faults-1-1"}
    assert link_problem(page, "#faults-1", tmp_path) is None
    assert link_problem(page, "#not-a-heading", tmp_path)
    guide = tmp_path / "guide.md"
    guide.write_text(
        "**`src/hetfl/new.py`**\n\n```python\nfrom hetfl.engine import nope\n```\n\n"
        "**`tests/test_engine.py` (edit)**\n\n`src/hetfl/new.py`, `src/hetfl/gone.py`, `hetfl.new.x`, "
        "`hetfl.data.npz`, `hetfl.gone`\n\n```bash\npython -m pytest tests/test_engine.py tests/test_gone.py\n"
        "python -m hetfl.new && python -m hetfl.gone && python benchmarks/gone.py\n```\n"
    )
    assert created_paths(guide) == {"src/hetfl/new.py"}
    found = "\n".join(named_problems(guide) + command_problems(guide.read_text(), created_paths(guide)))
    for wrong in ("import nope", "src/hetfl/gone.py", "`hetfl.gone`", "tests/test_gone.py", "hetfl.gone:"):
        assert wrong in found, wrong
    assert "benchmarks/gone.py" in found and "hetfl.new" not in found and "npz" not in found
