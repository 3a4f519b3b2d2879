"""``convert k8s`` reading a dump object by object (documents handed out one at a time, YAML
items built as composed, no deep copy per object): the same snapshot as reading the same
objects another way.

The dump is written by ``scripts/make_kube_dump.py`` (the one the speed of convert is
measured on; its YAML has aliases, as PyYAML's dumper writes a node's shared capacity and
allocatable). It is read three ways: as YAML (the streaming composer), as JSON
(``json.loads``), and as a folder of one-object JSON files made from the YAML by PyYAML's own
``safe_load`` (no List, no streaming, no alias handling of ours). The counts are worked out
from how the script builds the dump.
"""

from __future__ import annotations

import copy
import importlib.util
import json
from pathlib import Path
from typing import Any

import kubernetes.client as k8s
import pytest
import yaml

from gangplan.adapters.kube.objects import parse_official
from gangplan.adapters.kube.read import KubeOptions, read_kube
from gangplan.models import instance_from_snapshot

SCRIPT = Path(__file__).resolve().parents[3] / "scripts" / "make_kube_dump.py"
NODES, PODS = 40, 300


def _make_dump(out: Path) -> None:
    spec = importlib.util.spec_from_file_location("make_kube_dump", SCRIPT)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    assert module.main(["--nodes", str(NODES), "--pods", str(PODS), "-o", str(out)]) == 0


def _instance(path: Path) -> dict[str, Any]:
    result = read_kube([path], KubeOptions(topology_labels="kueue"))
    data = instance_from_snapshot(result.snapshot)
    data["metadata"].pop("source")  # the paths read: differ by construction
    return data


@pytest.fixture(scope="module")
def dumps(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    tmp = tmp_path_factory.mktemp("dump")
    paths = {"yaml": tmp / "dump.yaml", "json": tmp / "dump.json"}
    for path in paths.values():
        _make_dump(path)
    folder = tmp / "objects"
    folder.mkdir()
    for i, item in enumerate(yaml.safe_load(paths["yaml"].read_text())["items"]):
        (folder / f"{i:05d}.json").write_text(json.dumps(item))
    paths["folder"] = folder
    return paths


def test_the_dump_holds_aliases(dumps: dict[str, Path]) -> None:
    # what makes the YAML reading differ from the JSON one: anchors and aliases in items
    assert "capacity: *id001" in dumps["yaml"].read_text()


def test_yaml_json_and_object_files_read_into_the_same_instance(dumps: dict[str, Path]) -> None:
    from_yaml = _instance(dumps["yaml"])
    assert from_yaml == _instance(dumps["json"])
    assert from_yaml == _instance(dumps["folder"])
    # make_kube_dump: 9 in 10 pods running, at most 8 per node: min(270, 320) = 270
    # running; the other 30 pending in gangs of 8 (8, 8, 8, 6)
    assert len(from_yaml["nodes"]) == NODES
    assert len(from_yaml["running"]) == 270
    sizes = sorted(sum(r["count"] for r in g["roles"]) for g in from_yaml["gangs"])
    assert sizes == [6, 8, 8, 8]
    assert sorted(q["name"] for q in from_yaml["queues"]) == ["team-0", "team-1"]


def test_parse_official_never_changes_its_input() -> None:
    # a number where a quantity goes (read as the quantity "2") and an unknown field
    # (dropped and listed): both handled on copies, the caller's data stays as it was
    data = {
        "containers": [
            {"name": "c", "image": "x", "resources": {"requests": {"cpu": 2}}, "bogus": 1}
        ],
        "nodeName": "n1",
    }
    before = copy.deepcopy(data)
    spec, ignored = parse_official(k8s.V1PodSpec, data)
    assert data == before
    assert ignored == ["containers[0].bogus"]
    assert spec.containers[0].resources.requests == {"cpu": "2"}
    assert spec.node_name == "n1"
