"""The baseline registry (solver/placers/baselines.py): every placer by name, imported explicitly,
in the order the cycle runs them; no placer module registers itself."""

from __future__ import annotations

import subprocess
import sys

import pytest

from gangplan.solver.cycle.pipeline import PLACERS
from gangplan.solver.placers.baselines import BASELINES
from gangplan.solver.placers.fgd import fgd
from gangplan.solver.placers.greedy import greedy
from gangplan.solver.placers.topology_fit import topology_fit


def test_the_registry_names_every_baseline_in_order() -> None:
    assert list(BASELINES.items()) == [
        ("greedy", greedy),
        ("topology-fit", topology_fit),
        ("fgd", fgd),
    ]
    assert PLACERS == ("cpsat", "greedy", "topology-fit", "fgd")


def test_the_registry_is_read_only() -> None:
    with pytest.raises(TypeError):
        BASELINES["other"] = greedy  # type: ignore[index]


@pytest.mark.parametrize(
    "module",
    [
        "gangplan.solver.placers.greedy",
        "gangplan.solver.placers.topology_fit",
        "gangplan.solver.placers.fgd",
    ],
)
def test_a_placer_module_does_not_import_the_registry(module: str) -> None:
    """A placer is a plain function: importing its module alone leaves the registry unloaded
    (a placer that appended itself to BASELINES would have to import it)."""
    code = f"import sys, {module}; print('gangplan.solver.placers.baselines' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"
