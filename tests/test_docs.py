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
