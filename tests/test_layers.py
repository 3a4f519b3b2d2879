"""The layer rule (docs/design.md, "Layout"): imports run one way, adapters -> solver -> topology
-> models, and each layer keeps to its own third-party libraries.

Every module of the installed ``gangplan`` package is parsed (``ast``, so imports inside
functions count too, and relative imports and ``importlib.import_module("...")`` /
``__import__("...")`` calls with a literal name are resolved), and every import is checked
against :data:`MAY_IMPORT` and :data:`NEVER_IMPORT`:

* ``models`` imports nothing of ours; ``topology`` only ``models``; ``solver`` only
  ``models`` and ``topology``; ``adapters`` any of the three; no module imports
  ``gangplan.instances`` (package data, read with ``importlib.resources``);
* ``models``, ``topology`` and ``solver`` import no Kubernetes client, YAML, click, rich
  or matplotlib (no Kubernetes and no files below ``adapters``); ``models`` no OR-Tools
  or networkx; ``topology`` no OR-Tools;
* the independent judges, ``solver/judges/verify.py`` and ``solver/judges/score.py``, import neither
  OR-Tools nor the model builder (``gangplan.solver.model``);
* inside ``adapters``, the command line (``adapters/cli``) is the top: it imports the other
  rooms (``sim``, ``bench``, ``kube``, ...), and none of them imports it.

The checker itself is tested on synthetic sources with a planted upward import of each
form (:func:`test_the_checker_catches_a_planted_upward_import`), so that a rule that
silently stopped applying would fail there.
"""

from __future__ import annotations

import ast
import importlib.util
from collections.abc import Iterator
from pathlib import Path

import pytest

LAYERS = ("models", "topology", "solver", "adapters")

MAY_IMPORT: dict[str, frozenset[str]] = {
    "models": frozenset(),
    "topology": frozenset({"models"}),
    "solver": frozenset({"models", "topology"}),
    "adapters": frozenset({"models", "topology", "solver"}),
}
"""Our layers each layer may import, besides itself"""

_BORDER = frozenset({"kubernetes", "yaml", "click", "rich", "matplotlib"})
NEVER_IMPORT: dict[str, frozenset[str]] = {
    "models": _BORDER | {"ortools", "networkx"},
    "topology": _BORDER | {"ortools"},
    "solver": _BORDER,
    "adapters": frozenset(),
}
"""Third-party top-level packages each layer must not import"""

JUDGES = "gangplan.solver.judges"
"""The room of the independent judges: every module under it"""
JUDGES_NEVER = ("ortools", "gangplan.solver.model")

CLI = "gangplan.adapters.cli"
"""The command line: only its own modules import it"""


def _within(name: str, package: str) -> bool:
    return name == package or name.startswith(package + ".")


def _resolve(module: str, is_package: bool, level: int, name: str | None) -> str:
    """The absolute name of ``from <level dots><name> import ...`` inside ``module``."""
    parts = module.split(".")
    base = parts if is_package else parts[:-1]
    base = base[: len(base) - (level - 1)] if level > 1 else base
    return ".".join([*base, *([name] if name else [])])


def imported_names(module: str, source: str, *, is_package: bool = False) -> Iterator[str]:
    """Every module name ``source`` (the code of ``module``) imports, anywhere in it: for
    ``from a import b`` both ``a`` and ``a.b`` (``b`` may be a submodule)."""
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            yield from (alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = (
                _resolve(module, is_package, node.level, node.module)
                if node.level
                else node.module or ""
            )
            yield base
            yield from (f"{base}.{alias.name}" for alias in node.names if alias.name != "*")
        elif isinstance(node, ast.Call) and node.args:
            func = node.func
            called = (
                func.id
                if isinstance(func, ast.Name)
                else func.attr
                if isinstance(func, ast.Attribute)
                else ""
            )
            arg = node.args[0]
            if (
                called in ("import_module", "__import__")
                and isinstance(arg, ast.Constant)
                and isinstance(arg.value, str)
            ):
                yield arg.value


def upward_imports(module: str, source: str, *, is_package: bool = False) -> list[str]:
    """The imports of ``module`` (``gangplan.<layer>...``) that break the layer rule, each
    as ``"module imports name: why"``; empty when it keeps to it."""
    layer = module.split(".")[1]
    out: list[str] = []
    for name in sorted(set(imported_names(module, source, is_package=is_package))):
        parts = name.split(".")
        why = None
        if parts[0] == "gangplan" and len(parts) > 1:
            target = parts[1]
            if target == "instances":
                why = "gangplan.instances is package data, not code"
            elif target not in LAYERS:
                why = f"{target!r} is not a layer of gangplan"
            elif target != layer and target not in MAY_IMPORT[layer]:
                allowed = ", ".join(sorted(MAY_IMPORT[layer])) or "nothing of ours"
                why = f"{layer} may import {allowed}"
        elif parts[0] in NEVER_IMPORT[layer]:
            why = f"{layer} must not import {parts[0]}"
        if why is None and (module == JUDGES or module.startswith(JUDGES + ".")):
            hit = next((j for j in JUDGES_NEVER if name == j or name.startswith(j + ".")), None)
            if hit is not None:
                why = f"the independent judges import neither OR-Tools nor the model ({hit})"
        if why is None and _within(name, CLI) and not _within(module, CLI):
            why = "no room of adapters imports the command line (adapters/cli is the top)"
        if why is not None:
            out.append(f"{module} imports {name}: {why}")
    return out


def installed_modules() -> Iterator[tuple[str, Path]]:
    """``(module name, file)`` of every module of the installed layers."""
    for layer in LAYERS:
        spec = importlib.util.find_spec(f"gangplan.{layer}")
        assert spec is not None and spec.origin is not None, f"gangplan.{layer} not installed"
        root = Path(spec.origin).parent
        for path in sorted(root.rglob("*.py")):
            rel = path.relative_to(root).with_suffix("").parts
            parts = rel[:-1] if rel[-1] == "__init__" else rel
            yield ".".join(("gangplan", layer, *parts)), path


MODULES = list(installed_modules())


def test_every_layer_is_found() -> None:
    # a test over no modules would pass: each layer's package and a module of it are found
    names = {m for m, _ in MODULES}
    for module in (
        "gangplan.models.snapshot",
        "gangplan.topology.graph",
        "gangplan.solver.judges.verify",
        "gangplan.solver.judges.score",
        "gangplan.adapters.cli.common",
    ):
        assert module in names


@pytest.mark.parametrize(("module", "path"), MODULES, ids=[m for m, _ in MODULES])
def test_no_import_runs_upward(module: str, path: Path) -> None:
    source = path.read_text(encoding="utf-8")
    assert upward_imports(module, source, is_package=path.name == "__init__.py") == []


@pytest.mark.parametrize(
    ("module", "source", "caught"),
    [
        # a function-level import of the solver from models
        ("gangplan.models.plan", "def f():\n    from gangplan.solver import cycle\n", True),
        # topology reaching the CLI
        ("gangplan.topology.graph", "import gangplan.adapters.files\n", True),
        # a relative import out of solver/ into adapters/ (from a module under solver/model/)
        ("gangplan.solver.model.builder", "from ...adapters import render\n", True),
        # Kubernetes in the solver; YAML in models; networkx in models
        ("gangplan.solver.cycle.pipeline", "import kubernetes.client as k8s\n", True),
        ("gangplan.models.instance", "def load():\n    import yaml\n", True),
        ("gangplan.models.snapshot", "from networkx import DiGraph\n", True),
        # an import by name, as a string
        (
            "gangplan.models.snapshot",
            "import importlib\nimportlib.import_module('gangplan.solver')\n",
            True,
        ),
        ("gangplan.topology.graph", "__import__('gangplan.adapters.cli')\n", True),
        # the judges and the model builder
        (
            "gangplan.solver.judges.verify",
            "from gangplan.solver.model.builder import build\n",
            True,
        ),
        ("gangplan.solver.judges.score", "import ortools.sat.python.cp_model\n", True),
        ("gangplan.solver.judges.metrics", "from gangplan.solver.model import variables\n", True),
        # a room of adapters reaching the command line: by name, inside a function, relative
        ("gangplan.adapters.sim.engine", "from gangplan.adapters.cli.common import main\n", True),
        ("gangplan.adapters.sim.report", "def f():\n    from gangplan.adapters import cli\n", True),
        ("gangplan.adapters.sim.sweep", "from ..cli import common\n", True),
        ("gangplan.adapters.bench.suites", "import gangplan.adapters.cli\n", True),
        # package data is not code; a name that is no layer
        ("gangplan.adapters.files", "import gangplan.instances\n", True),
        ("gangplan.adapters.files", "from gangplan.tests import conftest\n", True),
        # allowed: downward imports, imports inside the layer, relative ones that stay
        ("gangplan.adapters.cli.solve", "from gangplan.solver.cycle import PLACERS\n", False),
        ("gangplan.adapters.cli.simulate", "from gangplan.adapters.sim import engine\n", False),
        ("gangplan.adapters.cli", "from . import simulate\n", False),
        (
            "gangplan.topology.graph",
            "from gangplan.models import Snapshot\nimport networkx\n",
            False,
        ),
        (
            "gangplan.solver.cycle.pipeline",
            "from .baselines import greedy\nimport ortools\n",
            False,
        ),
        ("gangplan.solver.model.builder", "from .. import verify\n", False),
        ("gangplan.adapters.kube.read", "import kubernetes\nimport yaml\n", False),
    ],
)
def test_the_checker_catches_a_planted_upward_import(
    module: str, source: str, caught: bool
) -> None:
    found = upward_imports(module, source)
    assert bool(found) is caught, found


def test_relative_imports_resolve_against_the_package() -> None:
    # `from . import x` in a package's __init__ is the package itself; in a module, its parent
    assert list(imported_names("gangplan.solver.model", "from . import x\n", is_package=True)) == [
        "gangplan.solver.model",
        "gangplan.solver.model.x",
    ]
    assert list(imported_names("gangplan.solver.model.builder", "from ..verify import v\n")) == [
        "gangplan.solver.verify",
        "gangplan.solver.verify.v",
    ]


def test_the_simulator_imports_nothing_of_the_command_line() -> None:
    # the simulate command lives in adapters/cli/simulate.py; the simulator it runs, every
    # module of adapters/sim, imports nothing of adapters/cli (it once did: a cli <-> sim cycle)
    sim = [(m, p) for m, p in MODULES if _within(m, "gangplan.adapters.sim")]
    assert {"gangplan.adapters.sim.engine", "gangplan.adapters.sim.report"} <= {m for m, _ in sim}
    found = [
        f"{module} imports {name}"
        for module, path in sim
        for name in imported_names(
            module, path.read_text(encoding="utf-8"), is_package=path.name == "__init__.py"
        )
        if _within(name, CLI)
    ]
    assert found == []
