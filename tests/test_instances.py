"""The instance files we ship (``instances/``): the JSON Schema accepts each, each loads as a
snapshot, each case file is a faithful translation of its ``../shared/cases`` scenario, and
the default instance is package data.

Expected values are worked out by hand from the case files (see the comments), not read
back from the code under test.
"""

from __future__ import annotations

import os
import tomllib
from collections import Counter
from importlib import resources
from pathlib import Path
from typing import Any

import jsonschema
import pytest
import yaml
from pydantic import BaseModel

from gangplan.adapters.files import load_snapshot
from gangplan.models import (
    DeviceLayout,
    DisruptionBudget,
    Gang,
    InstanceFile,
    Level,
    Node,
    NodeSelectorRequirement,
    NodeSelectorTerm,
    NumaNode,
    PcieSwitch,
    PodOwner,
    PreemptionSettings,
    Queue,
    QueuePreemption,
    ResourceNames,
    Role,
    Snapshot,
    SpreadRule,
    Taint,
    Toleration,
    TopologyConstraint,
    load_instance,
)
from gangplan.models.instance import NodePool, RunningEntry
from gangplan.models.quantity import to_base_units

ROOT = Path(__file__).resolve().parents[1]
INSTANCES = ROOT / "instances"
CASES = INSTANCES / "cases"
# beside $GANGPLAN_SHARED_DATA (its sibling cases/), else the first shared/cases beside the
# repository or above it
SHARED_CASES = (
    Path(os.environ["GANGPLAN_SHARED_DATA"]).parent / "cases"
    if os.environ.get("GANGPLAN_SHARED_DATA")
    else next(
        (p / "shared" / "cases" for p in ROOT.parents if (p / "shared" / "cases").is_dir()),
        ROOT.parent / "shared" / "cases",
    )
)

INSTANCE_FILES = sorted(
    p for p in INSTANCES.rglob("*") if p.suffix.lower() in (".yaml", ".yml", ".json")
)
CASE_FILES = sorted(CASES.glob("*.yaml"))
GIB = 2**30


def _ids(paths: list[Path]) -> list[str]:
    return [str(p.relative_to(INSTANCES)) for p in paths]


@pytest.fixture(scope="module")
def schema_validator() -> jsonschema.protocols.Validator:
    schema = InstanceFile.model_json_schema(by_alias=True)
    cls = jsonschema.validators.validator_for(schema, default=jsonschema.Draft202012Validator)
    cls.check_schema(schema)
    return cls(schema)


def test_instance_files_are_found() -> None:
    # the default, and one file per case of ../shared/cases (05 has two variants): 11 + 2
    assert INSTANCES / "default.yaml" in INSTANCE_FILES
    assert len(CASE_FILES) == 13
    assert set(CASE_FILES) <= set(INSTANCE_FILES)


# --------------------------------------------------------------------------- JSON Schema


@pytest.mark.parametrize("path", INSTANCE_FILES, ids=_ids(INSTANCE_FILES))
def test_schema_accepts_instance_file(path: Path, schema_validator: Any) -> None:
    data = yaml.safe_load(path.read_text(encoding="utf-8"))
    errors = [f"{list(e.absolute_path)}: {e.message}" for e in schema_validator.iter_errors(data)]
    assert errors == []


@pytest.mark.parametrize(
    "data",
    [
        # wrong kind
        {"apiVersion": "gangplan.io/v1alpha1", "kind": "Plan"},
        # unknown top-level field
        {"kind": "Instance", "clusters": []},
        # not a quantity
        {"nodes": [{"name": "n", "allocatable": {"cpu": "two"}}]},
        # negative weight
        {"queues": [{"name": "q", "weight": -1}]},
        # a gang needs at least one role
        {"gangs": [{"name": "g", "queue": "q", "roles": []}]},
        # zero count
        {"gangs": [{"name": "g", "queue": "q", "roles": [{"name": "w", "count": 0}]}]},
    ],
)
def test_schema_rejects_bad_documents(data: dict[str, Any], schema_validator: Any) -> None:
    """The accepting test above means something only if the schema can say no."""
    assert list(schema_validator.iter_errors(data)) != []


def test_schema_is_the_cli_schema() -> None:
    """`gangplan schema` prints the same schema the tests check against."""
    import json

    from click.testing import CliRunner

    from gangplan.adapters.cli import main

    result = CliRunner().invoke(main, ["schema"])
    assert result.exit_code == 0
    assert json.loads(result.output) == InstanceFile.model_json_schema(by_alias=True)


# --------------------------------------------------------------------------- loading


@pytest.mark.parametrize("path", INSTANCE_FILES, ids=_ids(INSTANCE_FILES))
def test_instance_file_loads(path: Path) -> None:
    snapshot, warnings = load_snapshot(path)
    assert isinstance(snapshot, Snapshot)
    assert snapshot.nodes and snapshot.queues and snapshot.gangs
    if path.name == "10-gpu-resource-names.yaml":
        assert warnings, "case 10 must warn about n1"
    else:
        assert warnings == []
    for node in snapshot.nodes:
        assert all(v >= 0 for v in snapshot.free(node.name).resources.values())


def test_default_instance_counts() -> None:
    # instances/default.yaml: 2 pools of 16 nodes with 8 GPUs each; 3 queues; 13 gangs;
    # running: 13 entries, three with replicas (4 + 2 + 2) -> 10 + 8 = 18 pods
    snapshot, _ = load_snapshot(INSTANCES / "default.yaml")
    assert len(snapshot.nodes) == 32
    assert sum(n.allocatable["nvidia.com/gpu"] for n in snapshot.nodes) == 256_000
    assert [q.name for q in snapshot.queues] == ["team-a", "team-b", "team-c"]
    assert len(snapshot.gangs) == 13
    assert len(snapshot.running) == 18


# --------------------------------------------------------------------------- case files


@pytest.mark.parametrize("path", CASE_FILES, ids=_ids(CASE_FILES))
def test_case_file_carries_its_expectations(path: Path) -> None:
    data = yaml.safe_load(path.read_text(encoding="utf-8"))
    meta = data["metadata"]
    stem = meta["case"] + (f"-{meta['variant']}" if "variant" in meta else "")
    assert path.stem == stem == meta["name"]
    assert isinstance(meta["expect"], list) and meta["expect"]
    assert all(isinstance(line, str) and line for line in meta["expect"])
    header = path.read_text(encoding="utf-8").split("apiVersion:")[0]
    for line in meta["expect"]:
        assert f"#   - {line}" in header, "each expect line is also a comment at the top"
    assert f"Source: {meta['source'].split(' (')[0]}" in header


def test_case_03_free_gpus() -> None:
    # 8 GPUs per node minus running r1..r4 (2, 6, 6, 6): free 6, 2, 2, 2
    s, _ = load_snapshot(CASES / "03-fragmented-gpus.yaml")
    free = {n: s.free(n).resources["nvidia.com/gpu"] for n in ("n1", "n2", "n3", "n4")}
    assert free == {"n1": 6000, "n2": 2000, "n3": 2000, "n4": 2000}
    assert {n: len(s.free(n).whole_gpus) for n in free} == {"n1": 6, "n2": 2, "n3": 2, "n4": 2}


def test_case_06_device_tree() -> None:
    # 8 switches P0..P7, P0..P3 on NUMA 0, P4..P7 on NUMA 1; P0 holds R0, R1, R2
    s, _ = load_snapshot(CASES / "06-joint-gpu-nic.yaml")
    layout = s.layout_of(s.node_by_name["n"])
    tree = {
        numa.name: {sw.name: (sw.gpus, sw.nics) for sw in numa.pcie_switches}
        for numa in layout.numa_nodes
    }
    assert tree == {
        "numa0": {
            "P0": (("G0",), ("R0", "R1", "R2")),
            "P1": (("G1",), ("R3",)),
            "P2": (("G2",), ("R4",)),
            "P3": (("G3",), ("R5",)),
        },
        "numa1": {
            "P4": (("G4",), ("R6",)),
            "P5": (("G5",), ("R7",)),
            "P6": (("G6",), ("R8",)),
            "P7": (("G7",), ("R9",)),
        },
    }
    assert s.nic == "rdma/hca"
    assert s.node_by_name["n"].allocatable["rdma/hca"] == 10_000
    assert s.gangs[0].joint == "pcie"


def test_case_08_running_group_is_nine_pods() -> None:
    # pods: 9 of 1 cpu + 1Gi on n1 -> 9 pods old-0..old-8; free on n1: 32-9 cpu, 64-9 Gi
    s, _ = load_snapshot(CASES / "08-queue-max.yaml")
    assert [p.name for p in s.running] == [f"old-{i}" for i in range(9)]
    assert {(p.gang, p.queue, p.node) for p in s.running} == {("old", "q", "n1")}
    assert s.free("n1").resources == {"cpu": 23_000, "memory": 55 * GIB}
    assert s.free("n2").resources == {"cpu": 32_000, "memory": 64 * GIB}
    assert s.queue_by_name["q"].max == {"cpu": 10_000, "memory": 10 * GIB}


def test_case_09_weight_zero_accepted() -> None:
    s, _ = load_snapshot(CASES / "09-zero-weight.yaml")
    assert s.queue_by_name["q"].weight == 0
    assert s.queue_by_name["q"].weight_milli == 0


def test_case_10_warns_and_clamps() -> None:
    # n1 advertises nvidia.com/a100 (opaque here) but its running pod asks nvidia.com/gpu
    s, warnings = load_snapshot(CASES / "10-gpu-resource-names.yaml")
    assert s.resources.gpu_model_resources == {}
    assert s.node_by_name["n1"].allocatable == {
        "nvidia.com/a100": 8000,
        "cpu": 64_000,
        "memory": 256 * GIB,
    }
    assert any("'n1'" in w and "nvidia.com/gpu" in w for w in warnings)
    assert all("'n2'" not in w for w in warnings)
    # nothing of n1 is taken by the pod's unadvertised request; no GPU devices there
    assert s.free("n1").resources == {"nvidia.com/a100": 8000, "cpu": 64_000, "memory": 256 * GIB}
    assert s.free("n1").whole_gpus == ()
    assert len(s.free("n2").whole_gpus) == 8


# --------------------------------------------------------------------------- fidelity


def _shared_scenarios() -> list[tuple[str, dict[str, Any], dict[str, Any]]]:
    """(file stem, case, variant or {}) for every scenario of ../shared/cases."""
    out: list[tuple[str, dict[str, Any], dict[str, Any]]] = []
    if not SHARED_CASES.is_dir():
        return out
    for path in sorted(SHARED_CASES.glob("*.yaml")):
        case = yaml.safe_load(path.read_text(encoding="utf-8"))
        if "variants" in case:
            for name, variant in case["variants"].items():
                out.append((f"{case['id']}-{name}", case, variant))
        else:
            out.append((case["id"], case, {}))
    return out


SCENARIOS = _shared_scenarios()
RESOURCE_NAMES = {"gpu": "nvidia.com/gpu", "rdma": "rdma/hca"}


def _res(raw: dict[str, Any] | None) -> dict[str, int]:
    """The neutral format's resources in our names and base units."""
    out: dict[str, int] = {}
    for name, value in (raw or {}).items():
        full = RESOURCE_NAMES.get(name, name)
        out[full] = to_base_units(full, value)
    return out


def _running(case: dict[str, Any]) -> list[tuple[Any, ...]]:
    """(gang, queue, node, requests, priority, min_member) per running pod; a case gives
    priority and min_member only where it preempts (else 0 and none)."""
    pods = []
    for entry in case.get("running") or []:
        n = entry.get("pods", 1)
        req = _res(entry.get("requests_each") or entry.get("requests"))
        pods += [
            (
                entry.get("gang"),
                entry.get("queue"),
                entry["node"],
                sorted(req.items()),
                entry.get("priority", 0),
                entry.get("min_member"),
            )
        ] * n
    return sorted(pods, key=repr)


def test_every_shared_case_has_a_file() -> None:
    if not SCENARIOS:
        pytest.skip(
            "../shared/cases is absent (the cases are read in place from ../shared, "
            "beside the repository)"
        )
    stems = {stem for stem, _, _ in SCENARIOS}
    assert sorted(stems) == sorted(p.stem for p in CASE_FILES)


@pytest.mark.parametrize(
    ("stem", "case", "variant"),
    [pytest.param(*sc, id=sc[0]) for sc in SCENARIOS]
    or [
        pytest.param(
            "",
            {},
            {},
            marks=pytest.mark.skip(
                "../shared/cases is absent (the cases are read in place from ../shared, "
                "beside the repository)"
            ),
        )
    ],
)
def test_case_file_is_faithful(stem: str, case: dict[str, Any], variant: dict[str, Any]) -> None:
    """Each case file says what its ../shared/cases scenario says, in our names and units."""
    path = CASES / f"{stem}.yaml"
    meta = yaml.safe_load(path.read_text(encoding="utf-8"))["metadata"]
    s, _ = load_snapshot(path)

    assert meta["case"] == case["id"]
    assert meta["expect"] == (variant or case)["expect"]
    assert meta["source"] == case["source"]

    cluster = case["cluster"]
    assert [lv.name for lv in s.levels] == cluster["levels"]
    assert [n.name for n in s.nodes] == [n["name"] for n in cluster["nodes"]]
    for raw in cluster["nodes"]:
        node = s.node_by_name[raw["name"]]
        assert node.allocatable == _res(raw["allocatable"])
        for level in s.levels:
            assert s.domain_name(node, level) == raw[level.name]
        # used_by_running restates the running list: our running pods hold exactly that
        held: Counter[str] = Counter()
        for pod in s.running_on(node.name):
            held.update(pod.requests)
        assert dict(held) == _res(raw.get("used_by_running"))
        switches = (raw.get("devices") or {}).get("pcie_switches")
        if switches:
            layout = s.layout_of(node)
            ours = [
                (sw.name, numa.name, list(sw.gpus), list(sw.nics)) for numa, sw in layout.switches()
            ]
            theirs = [(w["name"], f"numa{w['numa']}", w["gpus"], w["nics"]) for w in switches]
            assert sorted(ours) == sorted(theirs)
        else:
            assert not node.has_device_topology

    assert [(q.name, q.weight, q.max) for q in s.queues] == [
        (q["name"], q["weight"], _res(q.get("max"))) for q in case["queues"]
    ]
    ours_running = sorted(
        (
            (p.gang, p.queue, p.node, sorted(p.requests.items()), p.priority, p.min_member)
            for p in s.running
        ),
        key=repr,
    )
    assert ours_running == _running(case)
    # a case whose note allows preemption by priority: preemption on, and every queue lets
    # its gangs evict lower priorities (and nothing else); other cases keep it off
    preempts = "preemption by priority is allowed" in case.get("note", "")
    assert s.preemption.enabled is preempts
    assert all(
        (q.preemption.within_queue, q.preemption.reclaim)
        == ("lower_priority" if preempts else "never", "never")
        for q in s.queues
    )

    gangs = (variant or case)["gangs"]
    assert len(s.gangs) == len(gangs)
    for g, raw in zip(s.gangs, gangs, strict=True):
        assert (g.name, g.queue, g.priority, g.min_member, g.joint) == (
            raw["name"],
            raw["queue"],
            raw["priority"],
            raw["min_member"],
            raw.get("joint", "none"),
        )
        topo = raw.get("topology") or {}
        assert (g.topology.required if g.topology else None) == topo.get("required")
        assert (g.topology.preferred if g.topology else None) == topo.get("preferred")
        assert [(r.name, r.count, r.min_member, r.requests) for r in g.roles] == [
            (r["name"], r["count"], r.get("min_member"), _res(r["requests"])) for r in raw["roles"]
        ]


# --------------------------------------------------------------------------- package data


def test_default_instance_is_package_data() -> None:
    assert resources.files("gangplan.instances").joinpath("default.yaml").is_file()


def test_package_data_globs_cover_instance_files() -> None:
    """A non-editable install ships what pyproject's package-data names: it must name the
    default and every case file (the editable install finds them anyway, so check the globs)."""
    config = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    tool = config["tool"]["setuptools"]
    shipped: set[Path] = set()
    for package in ("gangplan.instances", "gangplan.instances.cases"):
        assert package in tool["packages"]
        folder = ROOT / tool["package-dir"][package]
        # setuptools expands the globs like Path.glob, inside the package's own folder
        shipped |= {p for g in tool["package-data"][package] for p in folder.glob(g)}
    assert sorted(p for p in shipped if p.suffix == ".yaml") == INSTANCE_FILES


# --------------------------------------------------------------------------- docs

DOCS = ROOT / "docs" / "instance-format.md"


def _docs_example() -> dict[str, Any]:
    text = DOCS.read_text(encoding="utf-8")
    after = text.split("<!-- example: complete", 1)[1]
    block = after.split("```yaml\n", 1)[1].split("```", 1)[0]
    data = yaml.safe_load(block)
    assert isinstance(data, dict)
    return data


def test_docs_example_is_valid(schema_validator: Any) -> None:
    # docs/instance-format.md's complete example: 4 pool nodes of 4 GPUs + cpu-0; two
    # running 'serve' pods of 1 GPU each on gpu-3 (they take gpu0 and gpu1 there)
    data = _docs_example()
    assert list(schema_validator.iter_errors(data)) == []
    s, warnings = load_instance(data)
    assert warnings == []
    assert [n.name for n in s.nodes] == ["gpu-0", "gpu-1", "gpu-2", "gpu-3", "cpu-0"]
    assert sum(n.allocatable.get("nvidia.com/gpu", 0) for n in s.nodes) == 16_000
    assert [p.name for p in s.running] == ["serve-0", "serve-1"]
    assert s.free("gpu-3").whole_gpus == ("gpu2", "gpu3")
    assert [n.labels["example.com/leaf"] for n in s.nodes] == [
        "leaf-0",
        "leaf-0",
        "leaf-1",
        "leaf-1",
        "leaf-1",
    ]
    sweep = s.gang_by_key["default/sweep"]
    assert (sweep.elastic, sweep.min_size, [sweep.role_min(r) for r in sweep.roles]) == (
        True,
        3,
        [1, 0],
    )


def _fields(model: type[BaseModel]) -> list[str]:
    return [f.alias or name for name, f in model.model_fields.items()]


@pytest.mark.parametrize(
    "model",
    [
        InstanceFile,
        ResourceNames,
        Level,
        DeviceLayout,
        NumaNode,
        PcieSwitch,
        NodePool,
        SpreadRule,
        Node,
        Taint,
        Queue,
        Gang,
        Role,
        TopologyConstraint,
        NodeSelectorTerm,
        NodeSelectorRequirement,
        Toleration,
        RunningEntry,
        PodOwner,
        DisruptionBudget,
        QueuePreemption,
        PreemptionSettings,
    ],
    ids=lambda m: m.__name__,
)
def test_docs_name_every_field(model: type[BaseModel]) -> None:
    """docs/instance-format.md documents every field of the instance file's models."""
    text = DOCS.read_text(encoding="utf-8")
    missing = [f for f in _fields(model) if f"`{f}`" not in text]
    assert missing == []
