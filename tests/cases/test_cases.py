"""The field cases of ../shared/cases (as instances/cases/): each ``expect`` line is a check.

CP-SAT must get every case right. The baselines model existing schedulers, faults
included: a case a baseline fails is listed in ``EXPECTED_FAILURES`` with the reason, and
the test then asserts that it still fails (strict), so a change in behaviour is noticed.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from pathlib import Path

import pytest

from gangplan.adapters.files import load_snapshot
from gangplan.models import GPU_MILLI, Plan, Snapshot, gang_key
from gangplan.solver.cycle.pipeline import run_baseline, solve_cycle
from gangplan.solver.judges.verify import verify
from gangplan.solver.result import SolverConfig

CASES = Path(__file__).resolve().parents[2] / "instances" / "cases"
CONFIG = SolverConfig(time_limit_s=30, deterministic=True, deterministic_time=10.0)

Check = Callable[[Snapshot, Plan, list[str]], list[str]]


def _placed(plan: Plan, gang: str) -> int:
    return plan.placed(gang)


def _nodes(plan: Plan, gang: str) -> list[str]:
    return [p.node for p in plan.pods_of(gang_key("default", gang))]


def _reason(plan: Plan, gang: str) -> tuple[str, str]:
    o = plan.outcome(gang_key("default", gang))
    assert o is not None
    return (o.reason.kind, o.reason.message) if o.reason else ("", "")


def case_01(s: Snapshot, plan: Plan, warnings: list[str]) -> list[str]:
    bad = []
    placed = {g: _placed(plan, g) for g in ("g1", "g2")}
    if sorted(placed.values()) != [0, 4]:
        return [f"exactly one of g1, g2 has placed = 4 (got {placed})"]
    winner = "g1" if placed["g1"] == 4 else "g2"
    loser = "g2" if winner == "g1" else "g1"
    if len(set(_nodes(plan, winner))) != 4:
        bad.append("its pods on 4 distinct nodes")
    kind, _msg = _reason(plan, loser)
    if kind != "lost":
        bad.append(f"the other's reason says full this cycle (lost), got {kind!r}")
    return bad


def case_02(s: Snapshot, plan: Plan, warnings: list[str]) -> list[str]:
    bad = []
    if _placed(plan, "g") != 0:
        bad.append("placed(g) = 0")
    if any(p.node == "n2" for p in plan.pods):
        bad.append("no pod is placed on n2")
    return bad


def case_03(s: Snapshot, plan: Plan, warnings: list[str]) -> list[str]:
    bad = []
    _kind, msg = _reason(plan, "g")
    if _placed(plan, "g") != 0:
        bad.append("placed(g) = 0")
    elif "fragmentation" not in msg or "only 1 node" not in msg:
        bad.append(
            f"reason names per-node fragmentation (only one node holds a 4-GPU pod): {msg!r}"
        )
    if _placed(plan, "p") != 1:
        bad.append("placed(p) = 1")
    return bad


def case_04(s: Snapshot, plan: Plan, warnings: list[str]) -> list[str]:
    bad = []
    if (_placed(plan, "a"), _placed(plan, "b")) != (2, 1):
        return ["placed(a) = 2 and placed(b) = 1"]
    if _nodes(plan, "b") != ["x1"] or sorted(_nodes(plan, "a")) != ["x2", "x3"]:
        bad.append("b is on x1; a's pods are on x2 and x3")
    return bad


def case_05a(s: Snapshot, plan: Plan, warnings: list[str]) -> list[str]:
    _kind, msg = _reason(plan, "g")
    if _placed(plan, "g") != 0:
        return ["placed(g) = 0"]
    if "one leaf" not in msg or "largest free leaf" not in msg:
        return [f"reason names the required level and the largest free leaf: {msg!r}"]
    return []


def case_05b(s: Snapshot, plan: Plan, warnings: list[str]) -> list[str]:
    if _placed(plan, "g") != 2:
        return ["placed(g) = 2"]
    if len(set(_nodes(plan, "g"))) != 1:
        return ["both pods on the same node"]
    return []


def case_06(s: Snapshot, plan: Plan, warnings: list[str]) -> list[str]:
    if _placed(plan, "t") != 1:
        return ["placed(t) = 1"]
    pod = plan.pods_of("default/t")[0]
    bad = []
    nics = set(pod.nics)
    if (
        not {"R3", "R4", "R5", "R6", "R7", "R8", "R9"} <= nics
        or len(nics & {"R0", "R1", "R2"}) != 1
    ):
        bad.append(f"NICs R3..R9 and exactly one of R0, R1, R2 (got {sorted(nics)})")
    layout = s.layout_of(s.node_by_name["n"])
    for _numa, sw in layout.switches():
        g = sum(1 for d in pod.gpus if d in sw.gpus)
        n = sum(1 for d in pod.nics if d in sw.nics)
        if not g == n == 1:
            bad.append(f"switch {sw.name}: GPUs given = NICs given = 1 (got {g}, {n})")
    return bad


def case_07(s: Snapshot, plan: Plan, warnings: list[str]) -> list[str]:
    bad = []
    if _placed(plan, "jb") + _placed(plan, "jc") != 1:
        bad.append("placed(jb) + placed(jc) = 1")
    gpus = sum(s.gang_by_key[p.gang_key].role(p.role).requests.get(s.gpu, 0) for p in plan.pods)
    if gpus != 2 * GPU_MILLI:
        bad.append(f"2 GPUs are in use after the cycle (got {gpus / GPU_MILLI})")
    return bad


def case_08(s: Snapshot, plan: Plan, warnings: list[str]) -> list[str]:
    bad = []
    _kind, msg = _reason(plan, "big")
    if _placed(plan, "big") != 0:
        bad.append("placed(big) = 0")
    elif "queue q" not in msg or "max" not in msg:
        bad.append(f"reason names queue q's max: {msg!r}")
    use: Counter[str] = Counter()
    for pod in s.running:
        if pod.queue == "q":
            use.update(pod.requests)
    for p in plan.pods:
        g = s.gang_by_key[p.gang_key]
        if g.queue == "q":
            use.update(g.role(p.role).requests)
    cap = s.queue_by_name["q"].max
    if any(use[r] > v for r, v in cap.items()):
        bad.append("q's usage after the cycle is within its max in every resource")
    return bad


def case_09(s: Snapshot, plan: Plan, warnings: list[str]) -> list[str]:
    if (_placed(plan, "j1"), _placed(plan, "j2")) != (1, 1):
        return ["placed(j1) = 1 and placed(j2) = 1"]
    return []


def case_10(s: Snapshot, plan: Plan, warnings: list[str]) -> list[str]:
    bad = []
    if not any("n1" in w and "nvidia.com/gpu" in w for w in warnings):
        bad.append("a warning names n1 and the resource")
    if _placed(plan, "g") != 1 or _nodes(plan, "g") != ["n2"]:
        bad.append("placed(g) = 1, on n2")
    for node in s.nodes:
        free = s.free(node.name)
        if any(v < 0 for v in free.resources.values()) or any(
            v < 0 for v in free.gpu_milli.values()
        ):
            bad.append(f"no free amount is negative ({node.name})")
    return bad


def case_11(s: Snapshot, plan: Plan, warnings: list[str]) -> list[str]:
    bad = []
    if sorted(e.pod for e in plan.evictions) != ["l-0"]:
        bad.append(f"the evicted pods are exactly {{l-0}} (got {[e.pod for e in plan.evictions]})")
    if _placed(plan, "h") != 2 or sorted(_nodes(plan, "h")) != ["n1", "n2"]:
        bad.append(f"placed(h) = 2, on n1 and n2 (got {_nodes(plan, 'h')})")
    if any(e.pod == "l-0" and e.for_gang != gang_key("default", "h") for e in plan.evictions):
        bad.append("l-0's eviction names h as the gang it made room for")
    return bad


def case_12(s: Snapshot, plan: Plan, warnings: list[str]) -> list[str]:
    bad = []
    if _placed(plan, "h") != 3:
        bad.append("placed(h) = 3")
    gone = {e.pod for e in plan.evictions if e.gang == "l"}
    left = sum(1 for p in s.running if p.gang == "l" and p.name not in gone)
    if left not in (0, 3):
        bad.append(f"l's pods left running are 0 or 3, never 1 or 2 (got {left})")
    elif left != 0:
        bad.append("all 3 of l's pods are evicted (here 0 left running)")
    return bad


CHECKS: dict[str, Check] = {
    "01-gang-deadlock": case_01,
    "02-no-partial-gang": case_02,
    "03-fragmented-gpus": case_03,
    "04-packing-order": case_04,
    "05-required-leaf-a": case_05a,
    "05-required-leaf-b": case_05b,
    "06-joint-gpu-nic": case_06,
    "07-fair-share-idle": case_07,
    "08-queue-max": case_08,
    "09-zero-weight": case_09,
    "10-gpu-resource-names": case_10,
    "11-preempt-idle-node": case_11,
    "12-preempt-whole-victim": case_12,
}

EXPECTED_FAILURES: dict[tuple[str, str], str] = {
    ("04-packing-order", "topology-fit"): (
        "Kueue TAS places gang a first (arrival order) in the lowest domain that holds it: "
        "node x1 holds both of a's 1-GPU pods (BestFit), which strands b's 2-GPU pod — the "
        "Kueue report this case comes from"
    ),
}
"""(case, baseline) -> why that scheduler fails the case (its recorded behaviour)."""


def _files() -> list[str]:
    return sorted(p.stem for p in CASES.glob("*.yaml"))


def test_every_case_file_has_a_check() -> None:
    assert set(_files()) == set(CHECKS)


@pytest.mark.parametrize("case", sorted(CHECKS))
def test_cpsat_meets_every_expectation(case: str) -> None:
    s, warnings = load_snapshot(CASES / f"{case}.yaml")
    result = solve_cycle(s, config=CONFIG)
    assert verify(s, result.plan) == []
    assert CHECKS[case](s, result.plan, warnings) == []


@pytest.mark.parametrize("placer", ["greedy", "topology-fit"])
@pytest.mark.parametrize("case", sorted(CHECKS))
def test_baseline_recorded(case: str, placer: str) -> None:
    s, warnings = load_snapshot(CASES / f"{case}.yaml")
    result = run_baseline(s, placer)
    assert verify(s, result.plan) == []
    failed = CHECKS[case](s, result.plan, warnings)
    if (case, placer) in EXPECTED_FAILURES:
        assert failed, f"{placer} now passes {case}; update EXPECTED_FAILURES"
    else:
        assert failed == []
