"""The YAML reader's own composer (:mod:`gangplan.adapters.yaml_input`): the elements of a
root mapping's sequences built one at a time, the alias counts kept as nodes come, the
nesting bound — with libyaml's C parser and the pure-Python one alike.

The data read is compared with PyYAML's own safe loader (``yaml.safe_load``, which composes
and builds a document whole), an independent reading of the same text; node counts are
worked out by hand in the comments (a node is a scalar, a sequence or a mapping; a
mapping's keys are nodes too, an alias is not one).
"""

from __future__ import annotations

import json
import subprocess
import sys
from typing import Any

import pytest
import yaml

from gangplan.adapters import yaml_input
from gangplan.adapters.files import dump_data
from gangplan.adapters.yaml_input import DocumentRefused

LOADERS = [
    pytest.param(yaml_input.PythonLoader, id="python"),
    pytest.param(
        yaml_input.Loader,
        id="libyaml",
        marks=pytest.mark.skipif(not yaml_input.C_LOADER, reason="PyYAML without libyaml"),
    ),
]


_TRACED = """
import json, sys, tracemalloc
import yaml
from gangplan.adapters import yaml_input
text = sys.stdin.read()
out, data = {}, []
for name in sys.argv[1:]:
    read = yaml.safe_load if name == "safe_load" else getattr(yaml_input, name)
    tracemalloc.start()
    try:
        data.append(read(text) if name == "safe_load" else yaml_input.load(text, read))
        problem = None
    except yaml_input.DocumentRefused as err:
        problem = err.problem
    out[name] = {"peak": tracemalloc.get_traced_memory()[1], "problem": problem}
    tracemalloc.stop()
out["same"] = all(d == data[0] for d in data)
print(json.dumps(out))
"""


def _traced(text: str, *readers: str) -> dict[str, Any]:
    """The peak of traced bytes while each reader (a loader of :mod:`yaml_input` by name, or
    ``safe_load``) reads ``text``, and the problem it refused the document with (and
    ``same``: whether the readers that read it read the same data), measured in a fresh
    interpreter. tracemalloc counts every thread's allocations since it started:
    in this process a thread an earlier test left running, or a trace already started,
    counts too (this file's bomb once peaked at 39.9 MB in a full run; alone, 0.2 MB)."""
    done = subprocess.run(
        [sys.executable, "-c", _TRACED, *readers],
        input=text,
        capture_output=True,
        text=True,
        check=True,
    )
    out: dict[str, Any] = json.loads(done.stdout)
    return out


def _name(loader: type[Any]) -> str:
    return "PythonLoader" if loader is yaml_input.PythonLoader else "Loader"


@pytest.mark.parametrize("loader", LOADERS)
@pytest.mark.parametrize(
    "text",
    [
        # a List's items, streamed, with an alias of an earlier item and of a root anchor
        "meta: &m {x: [1]}\nitems:\n- &a {k: v, n: [1, 2]}\n- *a\n- {<<: *m, y: 2}\n- *m\n",
        # an alias of a whole streamed sequence, inside another streamed one and at the root
        "items: &i [{a: 1}, {b: &q [2]}, *q]\nother: [*i, *i]\nz: *i\n",
        # a merge key whose value is a sequence of mappings: not streamed, merged
        "a: &a {x: 1}\nb: &b {y: 2}\n<<: [*a, *b]\nc: [3]\n",
        # sequences with other tags, and scalars of every safe type, as elements
        "s: !!set {a, b}\no: !!omap [a: 1, b: 2]\np: !!pairs [a: 1]\n"
        "items: [2020-01-01, 2020-01-01T10:00:00Z, 1.5, ~, yes, '1', !!str 5, !!binary aGk=,"
        " .inf]\n",
        # a root sequence and an empty document
        "- [1]\n- {a: [2]}\n",
        "",
        # an instance's shape: sequences of mappings under several keys
        "nodes:\n- {name: n1, allocatable: {cpu: 8}}\n- {name: n2}\ngangs: []\n"
        "queues: [{name: q}]\n",
    ],
)
def test_the_data_is_what_pyyaml_builds_for_the_whole_document(
    loader: type[Any], text: str
) -> None:
    assert yaml_input.load(text, loader) == yaml.safe_load(text)


@pytest.mark.parametrize("loader", LOADERS)
def test_an_alias_of_a_streamed_item_is_the_same_object(loader: type[Any]) -> None:
    # as PyYAML builds it whole: an anchored node is built once, its aliases share it
    data = yaml_input.load("items:\n- &a {k: v}\n- *a\nz: *a\n", loader)
    assert data["items"][0] is data["items"][1] is data["z"]
    data = yaml_input.load("items: &i [{a: 1}]\nz: *i\n", loader)
    assert data["items"] is data["z"]


@pytest.mark.parametrize("loader", LOADERS)
def test_a_bomb_spread_over_many_items_is_refused_whole(loader: type[Any]) -> None:
    # a = 1 + 10 = 11 nodes, b = 1 + 10 x 11 = 111, c = 1 + 10 x 111 = 1,111; items: 1 +
    # 2,000 x 1,111 = 2,222,001. Root 1 + keys 4 + 11 + 111 + 1,111 + 2,222,001 = 2,223,239
    # expanded, from 1 + 4 + 11 + 1 + 1 + 1 = 19 written. Each item alone is small and
    # within the rule (1,111 nodes of which 1,110 from aliases, 99.9%: over 0.99, but it
    # is the document so far that counts, as go-yaml counts it). Allowed at 2,223,239:
    # 0.99 - 0.89 x (2,223,239 - 400,000) / 3,600,000 = 0.539, and 2,223,220 / 2,223,239
    # come from aliases
    text = (
        "a: &a [" + ", ".join(["x"] * 10) + "]\n"
        "b: &b [" + ", ".join(["*a"] * 10) + "]\n"
        "c: &c [" + ", ".join(["*b"] * 10) + "]\n"
        "items: [" + ", ".join(["*c"] * 2_000) + "]\n"
    )
    got = _traced(text, _name(loader))[_name(loader)]
    assert got["problem"] == (
        "the document contains excessive aliasing: its aliases expand its 19 nodes to "
        "2,223,239 (refused as kubectl and the API server refuse it: at most 54% of a "
        "document of that size may come from aliases)"
    )
    # 2 million strings built would take over 16 MB of list slots alone; nothing was built
    assert got["peak"] < 8 * 2**20


@pytest.mark.parametrize("loader", LOADERS)
def test_a_refused_item_skips_the_rest_of_its_document_only(loader: type[Any]) -> None:
    # the duplicate key is refused while item 1 is built: the parser is mid-document
    text = "items:\n- {a: 1}\n- {a: 1, a: 2}\n- {b: [1, 2]}\n---\nc: 3\n"
    got = list(yaml_input.load_all(text, loader))
    assert [data for data, _ in got] == [None, {"c": 3}]
    refused = got[0][1]
    assert refused is not None
    assert refused.problem == "mapping key 'a' already defined at line 3"
    assert refused.problem_mark.line + 1 == 3


@pytest.mark.parametrize("loader", LOADERS)
def test_nesting_past_the_bound_is_a_yaml_error(loader: type[Any]) -> None:
    # libyaml refuses more than 1,000 levels itself; the pure-Python parser has no bound,
    # and the composer refuses the same (before: a RecursionError in PyYAML's composer)
    deep = yaml_input.MAX_DEPTH
    with pytest.raises(yaml.YAMLError):
        yaml_input.load("[" * 100_000 + "]" * 100_000, loader)
    with pytest.raises(yaml.YAMLError):
        yaml_input.load("[" * (deep + 1) + "]" * (deep + 1), loader)
    data = yaml_input.load("[" * deep + "]" * deep, loader)
    for _ in range(deep - 1):
        (data,) = data
    assert data == []


def test_a_long_list_is_read_without_holding_its_node_graph() -> None:
    # PyYAML composes the whole document (a node and two marks per value) before it builds
    # it; the streamed items hold one item's nodes at a time. Ratios of traced bytes, not
    # times: the same data costs less than half at its peak
    text = dump_data(
        {"kind": "List", "items": [{"k": f"v{i}", "n": [i, i + 1]} for i in range(3_000)]},
        "yaml",
    )

    peaks = _traced(text, "Loader", "safe_load")
    assert peaks["Loader"]["problem"] is None and peaks["same"]
    assert peaks["Loader"]["peak"] * 2 < peaks["safe_load"]["peak"]


def test_check_aliases_takes_counts_or_a_root() -> None:
    # the same refusal from the counts kept while composing and from a walk of the nodes
    root = yaml.compose(
        "a: &a [" + ", ".join(["x"] * 200) + "]\nb: [" + ", ".join(["*a"] * 10) + "]\n"
    )
    # a = 201 nodes; root 1 + keys 2 + 201 + b (1 + 10 x 201) = 2,215 expanded, 205 written:
    # 2,010 / 2,215 = 90.7% from aliases, under 99%: accepted either way
    yaml_input.check_aliases(root)
    assert yaml_input.expanded_size(root) == (2_215, 205)
    yaml_input.check_aliases(yaml_input.AliasCount(2_215, 205, root.start_mark))
    with pytest.raises(DocumentRefused):
        yaml_input.check_aliases(yaml_input.AliasCount(200_000, 205, root.start_mark))


def test_dump_data_reads_back_as_the_data() -> None:
    # libyaml's emitter (where PyYAML has it): the text of names and numbers is PyYAML's
    # own emitter's, and every string reads back the same, escapes and all
    plain = {"gangs": [{"name": "g1", "roles": [{"count": 8, "requests": {"cpu": 16000}}]}]}
    assert dump_data(plain, "yaml") == yaml.safe_dump(plain, sort_keys=False, allow_unicode=True)
    odd = {"\x13k\r": ["\U000263f0", "a\x85b", "", None, "yes", "1", "'", " lead"], "": 1.5}
    assert yaml.safe_load(dump_data(odd, "yaml")) == odd
