"""The README and docs/ speak to a reader of the repository: no reference they cannot
follow (an issue number, the team's notes, "these machines"), and the name rules stated."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]

INTERNAL = [
    r"\b[Ii]ssue \d+",
    r"\b[Ii]ssue \d+'s",
    r"SOLVER-NOTES",
    r"\b(these|this) (2-core )?machines?\b",
    r"\bdesign card\b",
    r"\ba later issue\b",
    r"\b(STYLE|TEAM|DESIGN)\.md\b",
]


@pytest.mark.parametrize("doc", DOCS, ids=lambda p: p.name)
def test_no_reference_a_reader_cannot_follow(doc: Path) -> None:
    text = doc.read_text(encoding="utf-8")
    found = [m.group(0) for pattern in INTERNAL for m in re.finditer(pattern, text)]
    assert found == [], f"{doc.name}: {found}"


def test_the_instance_format_states_the_name_rules() -> None:
    text = (ROOT / "docs" / "instance-format.md").read_text(encoding="utf-8")
    assert "RFC 1123 DNS subdomains" in text and "lowercase" in text
    assert "at most 253 characters" in text


# --------------------------------------------------------------------------- references

SOURCE_FOLDERS = ("models", "topology", "solver", "adapters", "tests", "scripts", "docs", "deploy")
SOURCE_SUFFIXES = {".py", ".md", ".toml", ".yaml", ".yml", ".sh"}


def _sources() -> list[Path]:
    """The repository's own text files: code, tests, scripts, docs, manifests."""
    files = [ROOT / "README.md", ROOT / "pyproject.toml"]
    for folder in SOURCE_FOLDERS:
        files += sorted(p for p in (ROOT / folder).rglob("*") if p.suffix in SOURCE_SUFFIXES)
    return [p for p in files if p.is_file()]


SOURCES = _sources()

NOTES = re.compile(r"\b(?:STYLE|TEAM|DESIGN|SOLVER-NOTES)\.md\b")
"""The team's notes, which live outside the repository (the design is ``docs/design.md``)"""


def test_the_sources_are_found() -> None:
    # a check over no files would pass
    names = {p.relative_to(ROOT).as_posix() for p in SOURCES}
    assert {"README.md", "docs/design.md", "adapters/__init__.py", "tests/test_docs.py"} <= names


def test_no_file_cites_the_teams_notes() -> None:
    found = [
        f"{p.relative_to(ROOT)}:{n}: {m.group(0)}"
        for p in SOURCES
        for n, line in enumerate(p.read_text(encoding="utf-8").splitlines(), 1)
        for m in NOTES.finditer(line)
    ]
    assert found == []


def test_every_docs_file_cited_exists() -> None:
    # `docs/solver.md`, "docs/bench.md": a path under docs/ named in a docstring, a comment,
    # a doc or a manifest is a file of the repository
    cited = re.compile(r"(?<![\w./])docs/[\w./-]*?[\w-]+\.md\b")
    missing = [
        f"{p.relative_to(ROOT)}: {m.group(0)}"
        for p in SOURCES
        for m in cited.finditer(p.read_text(encoding="utf-8"))
        if not (ROOT / m.group(0)).is_file()
    ]
    assert missing == []


CITED_PATH = re.compile(
    r"(?<![\w./])(?:models|topology|solver|adapters|tests|scripts|deploy|instances|docs)/"
    r"[\w./-]*[\w-](?:\.py|\.sh|\.yaml|\.md)?"
)
"""A path of the repository named in text: ``solver/judges/verify.py``, ``deploy/``."""


def test_every_repository_path_cited_exists() -> None:
    # a module moved (solver/verify.py -> solver/judges/verify.py) leaves no citation behind
    missing = sorted(
        {
            f"{p.relative_to(ROOT)}: {m.group(0)}"
            for p in SOURCES
            if p.name != "test_docs.py"
            for m in CITED_PATH.finditer(p.read_text(encoding="utf-8"))
            if not (ROOT / m.group(0)).exists()
        }
    )
    assert missing == []


def _anchors(doc: Path) -> set[str]:
    """GitHub's anchors of a Markdown file's headings: lowercase, punctuation but ``-`` and
    ``_`` dropped, spaces as ``-``. A ``#`` line inside a fenced code block is no heading."""
    out = set()
    fenced = False
    for line in doc.read_text(encoding="utf-8").splitlines():
        if line.startswith("```"):
            fenced = not fenced
        elif not fenced and (m := re.match(r"#{1,6} (.+)", line)):
            out.add(re.sub(r"[^\w\- ]", "", m.group(1).strip().lower()).replace(" ", "-"))
    return out


LINK = re.compile(r"\]\(([^)\s]+)\)")


@pytest.mark.parametrize(
    "doc", [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))], ids=lambda p: p.name
)
def test_every_link_resolves(doc: Path) -> None:
    # a relative link names a file (or folder) of the repository, and its #anchor a heading
    broken = []
    for m in LINK.finditer(doc.read_text(encoding="utf-8")):
        target = m.group(1)
        if re.match(r"[a-z]+:", target):
            continue  # https:, mailto:
        path, _, anchor = target.partition("#")
        file = (doc.parent / path) if path else doc
        unknown_anchor = bool(anchor) and file.suffix == ".md" and anchor not in _anchors(file)
        if not file.exists() or unknown_anchor:
            broken.append(target)
    assert broken == []


def test_the_anchor_rule() -> None:
    # the headings the README links to, as GitHub makes their anchors
    solver = _anchors(ROOT / "docs" / "solver.md")
    assert {"the-code-solver", "replan-moves-in-waves"} <= solver
    # a comment in a shell block of docs/simulate.md is not a heading
    simulate = _anchors(ROOT / "docs" / "simulate.md")
    assert "seeds" in simulate
    assert not any(a.startswith("the-same-with") for a in simulate)


# --------------------------------------------------------------------------- the README


def _first_screen() -> str:
    """The README up to its first rule (``---``): what a visitor sees first."""
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    return text.split("\n---\n", 1)[0]


def test_the_first_screen_keeps_its_two_commands() -> None:
    screen = _first_screen()
    assert "pip install . && gangplan solve\n" in screen  # the embedded default instance
    assert "pytest -q\n" in screen
    assert len(screen.splitlines()) <= 40


@pytest.mark.parametrize(
    ("name", "doc"),
    [
        ("`gangplan serve`", "docs/serve.md"),
        ("`gangplan replan`", "docs/solver.md#replan-moves-in-waves"),
        ("`gangplan simulate`", "docs/simulate.md"),
        ("`deploy/`", "docs/serve.md#install"),
    ],
)
def test_the_first_screen_says_what_each_part_is(name: str, doc: str) -> None:
    # one line each, with a link to its doc
    lines = [line for line in _first_screen().splitlines() if line.startswith(f"- {name}: ")]
    assert len(lines) == 1, name
    assert f"]({doc})" in lines[0]


def test_the_readme_names_every_command() -> None:
    from gangplan.adapters.cli import main

    text = (ROOT / "README.md").read_text(encoding="utf-8")
    unnamed = [c for c in sorted(main.commands) if not re.search(rf"gangplan {c}\b", text)]
    assert unnamed == []


def _rooms(layer: str = "adapters") -> list[str]:
    """The rooms of a layer (``adapters/``, ``solver/``): its subpackages."""
    return [p.name for p in sorted((ROOT / layer).iterdir()) if (p / "__init__.py").is_file()]


def test_the_layout_names_every_room_of_adapters() -> None:
    rooms = _rooms()
    assert {"cli", "serve", "sim", "kube", "traces", "bench"} <= set(rooms)
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    layout = text[text.index("## Layout") :]
    missing = [r for r in rooms if f"`{r}/`" not in layout]
    assert missing == [], f"README's Layout omits {missing}"
    docstring = (ROOT / "adapters" / "__init__.py").read_text(encoding="utf-8")
    missing = [r for r in rooms if f":mod:`gangplan.adapters.{r}`" not in docstring]
    assert missing == [], f"adapters/__init__.py omits {missing}"


def test_the_layout_names_every_room_of_solver() -> None:
    rooms = _rooms("solver")
    assert {"cycle", "placers", "model", "judges", "replan"} <= set(rooms)
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    layout = text[text.index("## Layout") :]
    layout = layout[layout.index("- `solver/`") : layout.index("- `adapters/`")]
    missing = [r for r in rooms if f"`{r}/`" not in layout]
    assert missing == [], f"README's Layout omits solver/{missing}"


def _code_tables() -> tuple[str, str]:
    """docs/solver.md's table of ``solver/`` (paths from ``solver/``) and of ``solver/model/``
    (paths from ``solver/model/``)."""
    text = (ROOT / "docs" / "solver.md").read_text(encoding="utf-8")
    code = text.index("## The code (`solver/`)")
    model = text.index("## The model (`solver/model/`)")
    end = text.index("\n## ", model + 1)
    return text[code:model], text[model:end]


def _first_cells(table: str) -> list[str]:
    """The file names in the first column of a Markdown table's rows."""
    cells = [row.split("|")[1] for row in table.splitlines() if row.startswith("| `")]
    return [name for cell in cells for name in re.findall(r"`([\w/]+\.py)`", cell)]


def test_every_module_the_code_tables_name_exists() -> None:
    code, model = _code_tables()
    named = [f"solver/{f}" for f in _first_cells(code)]
    named += [f"solver/model/{f}" for f in _first_cells(model)]
    assert len(named) >= 20  # both tables were read
    assert [f for f in named if not (ROOT / f).is_file()] == []
    rooms = re.findall(r"\| \*\*`(\w+)/`\*\*", code)
    assert sorted(rooms) == sorted(_rooms("solver"))


SECTION = re.compile(r"`*(docs/[\w/-]+\.md)`*,?\s+\(?\"([^\"\n]+)\"")
"""A citation of a part of a doc by its title: ``docs/solver.md``, "Preemption"."""


def _titles(doc: Path) -> set[str]:
    """What a citation may name in a doc, lowercased: a heading (outside code blocks, its
    backticks dropped) or a term in bold (``**Fair targets.**``, ``**GPU share**``)."""
    text = doc.read_text(encoding="utf-8")
    out = {t.strip().rstrip(".").lower() for t in re.findall(r"\*\*([^*\n]+)\*\*", text)}
    fenced = False
    for line in text.splitlines():
        if line.startswith("```"):
            fenced = not fenced
        elif not fenced and (m := re.match(r"#{1,6} (.+)", line)):
            out.add(m.group(1).replace("`", "").strip().lower())
    return out


def test_every_section_cited_by_title_exists() -> None:
    cited = [
        (p, m.group(1), m.group(2))
        for p in SOURCES
        for m in SECTION.finditer(p.read_text(encoding="utf-8"))
        if p.name != "test_docs.py"
    ]
    assert len(cited) >= 10  # the citations were found
    unknown = [
        f"{p.relative_to(ROOT)}: {doc}, {title!r}"
        for p, doc, title in cited
        if title.replace("`", "").lower() not in _titles(ROOT / doc)
    ]
    assert unknown == []


def test_the_code_tables_name_every_module_of_solver() -> None:
    # a module added to solver/ gets its line in docs/solver.md
    code, model = _code_tables()
    named = {f"solver/{f}" for f in _first_cells(code)}
    named |= {f"solver/model/{f}" for f in _first_cells(model)}
    modules = {
        p.relative_to(ROOT).as_posix()
        for p in (ROOT / "solver").rglob("*.py")
        if p.name != "__init__.py"
    }
    assert sorted(modules - named) == []
