"""Regressions in turning instance data into a snapshot (models/instance.py)."""

from __future__ import annotations

from typing import Any

import pytest

from gangplan.models import InstanceError, load_instance


def _problems(data: Any) -> list[str]:
    with pytest.raises(InstanceError) as info:
        load_instance(data)
    return [str(p) for p in info.value.problems]


def test_unknown_spread_level_does_not_hide_other_problems() -> None:
    """Regression: an unknown level in a pool's spread rule returned at once, so the file's
    other problems (here an unknown queue) appeared only after it was fixed."""
    data = {
        "kind": "Instance",
        "levels": [{"name": "leaf"}],
        "node_pools": [
            {
                "name": "n-{index}",
                "count": 3,
                "allocatable": {"cpu": 4},
                "spread": [{"level": "rack", "size": 2, "name": "r-{n}"}],
            }
        ],
        "queues": [{"name": "q"}],
        "gangs": [{"name": "g", "queue": "nope", "roles": [{"name": "w", "count": 1}]}],
    }
    assert _problems(data) == [
        "node_pools[0].spread[0].level: unknown level 'rack' (accepted: 'leaf')",
        "gangs[0].queue: unknown queue 'nope' (declared: 'q')",
    ]


def test_empty_file_says_so() -> None:
    """An empty YAML file parses to None: say "empty", not "holds a NoneType"."""
    assert _problems(None) == ["the file is empty (expected a mapping, kind: Instance)"]


def test_non_mapping_names_its_type() -> None:
    assert _problems([1, 2]) == ["the file holds a list, not a mapping (kind: Instance)"]
