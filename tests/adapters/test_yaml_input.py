"""The YAML reader every file goes through (:mod:`gangplan.adapters.yaml_input`): duplicate
keys refused with both lines, alias expansion bounded by go-yaml's rule, documents of a
stream refused one by one — with libyaml's C parser and the pure-Python one alike.

Node counts are worked out by hand in the comments (a node is a scalar, a sequence or a
mapping; a mapping's keys are nodes too).
"""

from __future__ import annotations

import itertools
from typing import Any

import pytest
import yaml

from gangplan.adapters import yaml_input
from gangplan.adapters.yaml_input import DocumentRefused, allowed_alias_ratio

LOADERS = [
    pytest.param(yaml_input.PythonLoader, id="python"),
    pytest.param(
        yaml_input.Loader,
        id="libyaml",
        marks=pytest.mark.skipif(not yaml_input.C_LOADER, reason="PyYAML without libyaml"),
    ),
]


def laughs(levels: int, width: int = 10) -> str:
    """``a: &a [x, ...]`` (``width`` x's), then each next key a list of ``width`` aliases of
    the one before: the last expands to ``width ** levels`` scalars."""
    names = "abcdefghijklmnop"[:levels]
    lines = [f"a: &a [{', '.join(['x'] * width)}]"]
    for prev, name in itertools.pairwise(names):
        lines.append(f"{name}: &{name} [{', '.join([f'*{prev}'] * width)}]")
    return "\n".join(lines) + "\n"


def refusal(text: str, loader: type[Any]) -> DocumentRefused:
    with pytest.raises(DocumentRefused) as err:
        yaml_input.load(text, loader)
    return err.value


# --------------------------------------------------------------------------- duplicate keys


@pytest.mark.parametrize("loader", LOADERS)
@pytest.mark.parametrize(
    ("text", "problem", "line"),
    [
        # two gangs: keys (before: the second replaced the first, a gang disappeared)
        ("gangs: [a]\nnodes: []\ngangs: [b]\n", "mapping key 'gangs' already defined at line 1", 3),
        # a resource given twice inside a nested mapping
        (
            "requests:\n  nvidia.com/gpu: 8\n  cpu: 1\n  nvidia.com/gpu: 1\n",
            "mapping key 'nvidia.com/gpu' already defined at line 2",
            4,
        ),
        # flow style, on one line
        ("{a: 1, a: 2}\n", "mapping key 'a' already defined at line 1", 1),
        # 1 and true are different YAML keys (equal in Python): the same key is 1 twice
        ("1: x\n1: y\n", "mapping key 1 already defined at line 1", 2),
    ],
)
def test_duplicate_keys_are_refused_with_both_lines(
    loader: type[Any], text: str, problem: str, line: int
) -> None:
    err = refusal(text, loader)
    assert err.problem == problem
    assert err.problem_mark.line + 1 == line


@pytest.mark.parametrize("loader", LOADERS)
def test_merge_keys_may_be_overridden(loader: type[Any]) -> None:
    # YAML merge keys: the mapping's own x overrides the merged one, y comes from the base
    text = "base: &b {x: 1, y: 2}\nthis:\n  <<: *b\n  x: 5\n"
    assert yaml_input.load(text, loader) == {"base": {"x": 1, "y": 2}, "this": {"x": 5, "y": 2}}


@pytest.mark.parametrize("loader", LOADERS)
def test_the_same_key_in_different_mappings_is_fine(loader: type[Any]) -> None:
    text = "a: {name: x}\nb: {name: y}\n"
    assert yaml_input.load(text, loader) == {"a": {"name": "x"}, "b": {"name": "y"}}


# --------------------------------------------------------------------------- aliases


def test_the_alias_ratio_is_go_yamls() -> None:
    # go-yaml decode.go: 0.99 up to 400,000 nodes, 0.10 from 4,000,000, linear between
    assert allowed_alias_ratio(1_000) == 0.99
    assert allowed_alias_ratio(400_000) == 0.99
    assert allowed_alias_ratio(2_200_000) == pytest.approx(0.99 - 0.89 / 2)
    assert allowed_alias_ratio(4_000_000) == 0.10
    assert allowed_alias_ratio(10**9) == 0.10


@pytest.mark.parametrize("loader", LOADERS)
def test_a_billion_laughs_is_refused_before_it_is_built(loader: type[Any]) -> None:
    # 9 levels of 10: a = 1 + 10 = 11 nodes, b = 1 + 10 x 11 = 111, ... i = 1,111,111,111;
    # with the root and its 9 keys, 10 + (11 + 111 + ... + 1,111,111,111) = 10 +
    # 1,234,567,899 = 1,234,567,909 nodes expanded, from 1 + 9 + 11 + 8 = 29 written
    err = refusal(laughs(9), loader)
    assert err.problem == (
        "the document contains excessive aliasing: its aliases expand its 29 nodes to "
        "1,234,567,909 (refused as kubectl and the API server refuse it: at most 10% of a "
        "document of that size may come from aliases)"
    )
    assert (err.problem_mark.line, err.problem_mark.column) == (0, 0)


@pytest.mark.parametrize("loader", LOADERS)
def test_a_few_aliases_are_fine(loader: type[Any]) -> None:
    # 3 levels of 10: c expands to 1,000 x's; 1 + 3 + 11 + 111 + 1,111 = 1,237 nodes, of
    # which 1,237 - 17 = 1,220 through aliases: 98.6%, under go-yaml's 99% for small
    # documents
    data = yaml_input.load(laughs(3), loader)
    assert data["c"] == [[["x"] * 10] * 10] * 10
    # 4 levels: 10,000 x's, 12,349 nodes from 19: 99.8% from aliases, refused
    assert "excessive aliasing" in refusal(laughs(4), loader).problem


@pytest.mark.parametrize("loader", LOADERS)
def test_an_alias_inside_itself_is_refused(loader: type[Any]) -> None:
    err = refusal("a: &a [1, *a]\n", loader)
    assert err.problem == "an alias refers to a node that holds it: the document would be infinite"


def test_text_without_an_alias_is_not_counted(monkeypatch: pytest.MonkeyPatch) -> None:
    # '*' in quotes, or inside a word, cannot start an alias: the count is skipped
    counted: list[object] = []
    monkeypatch.setattr(yaml_input, "check_aliases", counted.append)
    assert yaml_input.load("verbs: ['*']\nglob: a*b\n") == {"verbs": ["*"], "glob": "a*b"}
    assert counted == []
    yaml_input.load("a: &x 1\nb: *x\n")
    assert len(counted) == 1


# --------------------------------------------------------------------------- streams


@pytest.mark.parametrize("loader", LOADERS)
def test_a_refused_document_does_not_stop_the_stream(loader: type[Any]) -> None:
    text = "a: 1\n---\nb: 1\nb: 2\n---\n" + laughs(9) + "---\nc: 3\n"
    got = list(yaml_input.load_all(text, loader))
    assert [data for data, _ in got] == [{"a": 1}, None, None, {"c": 3}]
    assert got[1][1] is not None and got[1][1].problem_mark.line + 1 == 4
    assert got[2][1] is not None and "excessive aliasing" in got[2][1].problem


@pytest.mark.parametrize("loader", LOADERS)
def test_text_that_is_not_yaml_still_raises(loader: type[Any]) -> None:
    with pytest.raises(yaml.YAMLError):
        list(yaml_input.load_all("a: [1\n", loader))


def test_without_libyaml_a_warning_says_so(monkeypatch: pytest.MonkeyPatch) -> None:
    from pathlib import Path

    from gangplan.adapters.files import load_snapshot

    default = Path(__file__).resolve().parents[2] / "instances" / "default.yaml"
    assert load_snapshot(default)[1] == []
    monkeypatch.setattr(yaml_input, "C_LOADER", False)
    assert load_snapshot(default)[1] == [
        "PyYAML has no libyaml here: YAML is read with the pure-Python parser, about 4x "
        "slower (install libyaml and reinstall PyYAML for the C parser)"
    ]


def test_kubernetes_dumps_are_read_with_the_default_loader(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Any
) -> None:
    # before: the dump reader used PyYAML's pure-Python safe_load_all (4x slower than
    # libyaml on a 5,000-node dump); now the default loader, libyaml's C parser where it exists
    from gangplan.adapters.kube.read import read_kube

    made: list[str] = []

    class Spy(yaml_input.Loader):  # type: ignore[misc, valid-type]
        def __init__(self, stream: Any):
            made.append(type(self).__mro__[1].__name__)
            super().__init__(stream)

    monkeypatch.setattr(yaml_input, "Loader", Spy)
    dump = tmp_path / "d.yaml"
    dump.write_text("apiVersion: v1\nkind: Node\nmetadata: {name: n1}\n")
    assert [n.name for n in read_kube([dump]).snapshot.nodes] == ["n1"]
    assert made == ["CLoader" if yaml_input.C_LOADER else "PythonLoader"]
