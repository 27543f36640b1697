"""The README stays short, its Chinese translation stays in step with it, every documentation link resolves, and the
README's commands are the ones CI runs. Reads files only: fast, no network."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
README = ROOT / "README.md"
README_ZH = ROOT / "README.zh-CN.md"
DOCS = ROOT / "docs"
CI = ROOT / ".ci" / "run"
MARKDOWN = [README, README_ZH, *sorted(DOCS.rglob("*.md"))]
MAX_README_LINES = 300

FENCE = re.compile(r"^\s*(`{3,}|~{3,})\s*([^`]*)$")
INLINE_CODE = re.compile(r"(`+)(.+?)\1")
LINK = re.compile(r"!?\[[^\]]*\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")
SCHEME = re.compile(r"^[a-zA-Z][a-zA-Z0-9+.-]*:")
# Inline code that is a command a reader types, compared between the two READMEs.
COMMAND = re.compile(r"^(python |\.venv/bin/|bash |source |MLFLOW_TRACKING_URI=|RAGTUNE_|CMAKE_ARGS=|TORCH_INDEX_URL=)")


def rel(path: Path) -> str:
    return str(path.relative_to(ROOT))


def split_fences(text: str) -> tuple[list[tuple[str, str]], str]:
    """The fenced code blocks of a Markdown text, in order, as (info string, content), and the text without them."""
    blocks: list[tuple[str, str]] = []
    prose: list[str] = []
    fence: str | None = None
    info = ""
    body: list[str] = []
    for line in text.splitlines():
        match = FENCE.match(line)
        if fence is None:
            if match:
                fence, info, body = match.group(1), match.group(2).strip(), []
            else:
                prose.append(line)
        elif match and match.group(1)[0] == fence[0] and len(match.group(1)) >= len(fence) and not match.group(2):
            blocks.append((info, "\n".join(body)))
            fence = None
        else:
            body.append(line)
    assert fence is None, "a fenced code block is never closed"
    return blocks, "\n".join(prose)


def prose_without_code(path: Path) -> str:
    return INLINE_CODE.sub("", split_fences(path.read_text(encoding="utf-8"))[1])


def command_spans(path: Path) -> list[str]:
    spans = [m.group(2).strip() for m in INLINE_CODE.finditer(split_fences(path.read_text(encoding="utf-8"))[1])]
    return [span for span in spans if COMMAND.match(span)]


def links(path: Path) -> list[str]:
    return LINK.findall(prose_without_code(path))


def relative_links(path: Path) -> list[str]:
    return [target for target in links(path) if not SCHEME.match(target)]


def slug(heading: str) -> str:
    """GitHub's anchor for a heading: lower case, punctuation dropped, spaces to hyphens."""
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", heading.strip().lower())
    return re.sub(r"[^\w\- ]", "", text).replace(" ", "-")


def anchors(path: Path) -> set[str]:
    seen: dict[str, int] = {}
    found = set()
    for line in split_fences(path.read_text(encoding="utf-8"))[1].splitlines():
        match = re.match(r"^#{1,6}\s+(.*?)\s*#*\s*$", line)
        if not match:
            continue
        base = slug(match.group(1))
        count = seen.get(base, 0)
        seen[base] = count + 1
        found.add(base if count == 0 else f"{base}-{count}")
    return found


def test_readme_is_at_most_300_lines():
    lines = len(README.read_text(encoding="utf-8").splitlines())
    assert lines <= MAX_README_LINES, f"README.md has {lines} lines; move detail into docs/ (limit {MAX_README_LINES})"


def test_the_chinese_readme_has_the_same_code_blocks_in_the_same_order():
    english = split_fences(README.read_text(encoding="utf-8"))[0]
    chinese = split_fences(README_ZH.read_text(encoding="utf-8"))[0]
    assert english, "README.md has no code blocks"
    assert chinese == english


def test_the_chinese_readme_has_the_same_commands_in_the_same_order():
    english = command_spans(README)
    assert english, "README.md has no inline commands"
    assert command_spans(README_ZH) == english


def test_both_readmes_link_the_same_pages():
    def targets(path: Path) -> list[str]:
        return sorted({target.split("#")[0] for target in relative_links(path) if not target.startswith("#")})

    assert targets(README_ZH) == targets(README)


def test_the_readme_links_every_docs_page():
    linked = {(README.parent / target.split("#")[0]).resolve() for target in relative_links(README)}
    pages = [*sorted(DOCS.glob("*.md")), DOCS / "results" / "README.md"]
    assert [rel(page) for page in pages if page.resolve() not in linked] == []


def test_both_readmes_switch_language_in_their_first_line():
    switch = "[English](README.md) | [简体中文](README.zh-CN.md)"
    for path in (README, README_ZH):
        assert path.read_text(encoding="utf-8").splitlines()[0] == switch, rel(path)


@pytest.mark.parametrize("path", MARKDOWN, ids=rel)
def test_relative_links_point_to_files_that_exist(path: Path):
    broken = []
    for target in relative_links(path):
        file_part, _, anchor = target.partition("#")
        destination = (path.parent / file_part).resolve() if file_part else path
        if not destination.is_file():
            broken.append(f"{target}: no such file")
        elif anchor and destination.suffix == ".md" and anchor not in anchors(destination):
            broken.append(f"{target}: no heading with that anchor")
    assert broken == []


@pytest.mark.parametrize("path", sorted(DOCS.rglob("*.md")), ids=rel)
def test_every_docs_page_links_back_to_the_readme(path: Path):
    head = "\n".join(path.read_text(encoding="utf-8").splitlines()[:5])
    back = [target for target in LINK.findall(INLINE_CODE.sub("", head)) if not SCHEME.match(target)]
    assert README.resolve() in {(path.parent / t.split("#")[0]).resolve() for t in back}


@pytest.mark.parametrize("path", sorted((DOCS / "results").glob("*.md")), ids=rel)
def test_results_are_dated_and_name_their_command(path: Path):
    if path.name == "README.md":
        return
    assert re.fullmatch(r"\d{4}-\d{2}-\d{2}-[a-z0-9-]+\.md", path.name)
    first = path.read_text(encoding="utf-8").splitlines()[0]
    assert first.startswith(("Command: ", "Commands: ")), f"{rel(path)} must start with the command that produced it"


def test_the_readme_test_commands_are_the_ones_ci_runs():
    ci = {line.strip() for line in CI.read_text(encoding="utf-8").splitlines()}
    assert ".venv/bin/python -m pytest" in ci
    assert ".venv/bin/python -m pytest -m slow" in ci
    blocks = [body for info, body in split_fences(README.read_text(encoding="utf-8"))[0] if info in ("bash", "sh")]
    commands = [part.strip() for body in blocks for line in body.splitlines() for part in line.split("&&")]
    assert ".venv/bin/python -m pytest" in commands and ".venv/bin/python -m pytest -m slow" in commands
    assert [command for command in commands if command and command not in ci] == []


def test_the_config_reference_is_what_ragtune_config_docs_writes():
    from serving.config_docs import CONFIG_DOCS, reference

    assert CONFIG_DOCS.read_text(encoding="utf-8") == reference(), "docs/config.md is stale: run `ragtune config-docs`"


def test_the_config_reference_covers_every_group_and_explains_every_key():
    from serving.config_docs import reference

    text = reference()
    groups = sorted(path.name for path in (ROOT / "conf").iterdir() if path.is_dir() and path.name != "hydra")
    assert [group for group in groups if f"## `{group}`" not in text] == []
    keys = [line for line in text.splitlines() if line.startswith("| `") and line.count("|") >= 5]
    assert len(keys) > 60
    assert [line for line in keys if line.rstrip().endswith("|  |")] == []  # every key has its meaning


def test_the_metrics_reference_is_what_ragtune_metrics_docs_writes():
    from experiments.runs.metrics_docs import METRICS_DOCS, metrics_reference

    assert METRICS_DOCS.read_text(encoding="utf-8") == metrics_reference(), "docs/metrics.md is stale: run `ragtune metrics-docs`"


def test_the_architecture_layout_is_what_ragtune_architecture_docs_writes():
    from serving.architecture_docs import ARCHITECTURE_DOCS, architecture_page

    assert ARCHITECTURE_DOCS.read_text(encoding="utf-8") == architecture_page(), (
        "docs/architecture.md's layout is stale: run `ragtune architecture-docs`"
    )


def test_the_architecture_layout_cuts_long_lines_and_reads_first_sentences(tmp_path: Path):
    from serving.architecture_docs import BEGIN, END, FOLDERS, PACKAGES, WIDTH, architecture_page

    for name in ("run.py", "serve.py"):
        (tmp_path / name).write_text(f'"""The {name} entry point. More."""\n', encoding="utf-8")
    files = {
        "__init__.py": "",
        "sub/__init__.py": '"""A group, e.g. its members."""\n',
        "plain.py": "x = 1\n",
        "long.py": f'"""{"word " * 40}end.\n\nNot this."""\n',
    }
    for package in PACKAGES:
        (tmp_path / package / "sub").mkdir(parents=True)
        for name, text in files.items():
            (tmp_path / package / name).write_text(text, encoding="utf-8")
    (tmp_path / "notes").mkdir()  # not a package: not listed
    page = tmp_path / "architecture.md"
    page.write_text(f"# hand\n{BEGIN}\nold\n{END}\n## kept\n", encoding="utf-8")
    text = architecture_page(page, tmp_path)
    assert text.startswith(f"# hand\n{BEGIN}\n```\n") and text.endswith(f"```\n{END}\n## kept\n")
    lines = text.splitlines()
    assert "run.py          The run.py entry point." in lines
    assert "components/" in lines and "  plain.py" in lines and "notes/" not in text
    assert "  sub/      A group, e.g. its members." in lines
    assert max(map(len, lines)) <= WIDTH and f"data/           {FOLDERS['data']}" in lines
    assert [line for line in lines if "long.py" in line][0].endswith("word…")


# A code path in backticks: a folder (ending in `/`), a module or a YAML file, optionally `::name`, a def in it.
CODE_PATH = re.compile(r"^(?P<path>[\w*-]+(?:/[\w.*-]+)*(?:/|\.py|\.yaml))(?:::(?P<name>\w+))?$")


def prose_blocks(path: Path) -> list[str]:
    """A page's prose (fenced blocks left out) cut into paragraphs, list items, table rows and headings."""
    blocks: list[list[str]] = []
    for line in split_fences(path.read_text(encoding="utf-8"))[1].splitlines():
        if not blocks or not line.strip() or line.startswith(("|", "- ", "#")):
            blocks.append([])
        if line.strip():
            blocks[-1].append(line)
    return [" ".join(block) for block in blocks if block]


def defines(module: Path, name: str) -> bool:
    definitions = ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef
    body = ast.parse(module.read_text(encoding="utf-8")).body
    return name in {node.name for node in body if isinstance(node, definitions)}


def missing_code_paths(path: Path) -> list[str]:
    """The code paths a page names in backticks that are not in the tree. A path is found from the repository
    root or, written short, in the folder of a path named before it in the same paragraph, list item or table row
    (the Packages table names `retrievers/` after `components/`, then `retrieval.py` after `retrievers/`)."""
    missing = []
    for block in prose_blocks(path):
        folders = {ROOT: None}  # an ordered set
        for span in (match.group(2).strip() for match in INLINE_CODE.finditer(block)):
            if not (named := CODE_PATH.match(span)):
                continue
            is_folder = named["path"].endswith("/")
            hits = (hit for folder in folders for hit in sorted(folder.glob(named["path"].rstrip("/"))))
            found = [hit for hit in hits if hit.is_dir() == is_folder]
            if not found or (named["name"] and not any(defines(hit, named["name"]) for hit in found)):
                missing.append(span)
            folders |= {(hit if is_folder else hit.parent): None for hit in found}
    return missing


def test_every_code_path_the_architecture_page_names_exists():
    assert missing_code_paths(DOCS / "architecture.md") == []


def test_the_code_path_check_finds_short_names_only_after_their_folder(tmp_path: Path):
    page = tmp_path / "page.md"
    page.write_text(
        "| `components/` | `retrievers/` (`retrieval.py`), `gate.py` |\n\n`experiments/comparison/` (`gate.py`)\n\n"
        "`components/weaviate_*_retriever.py`, `serving/http/streaming.py::streamed`, `pipelines/spec.py::nope`\n",
        encoding="utf-8",
    )
    assert missing_code_paths(page) == ["gate.py", "components/weaviate_*_retriever.py", "pipelines/spec.py::nope"]
