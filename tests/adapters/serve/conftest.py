"""Fixtures of the serve tests: the in-memory API, the loopback stand-in with the official
client in front of it, and a fake clock."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from standin import StandIn

from gangplan.adapters.serve.clock import FakeClock
from gangplan.adapters.serve.memory import InMemoryApi


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


@pytest.fixture
def memory(clock: FakeClock) -> InMemoryApi:
    return InMemoryApi(clock)


@pytest.fixture
def standin(memory: InMemoryApi) -> Iterator[StandIn]:
    with StandIn(memory) as server:
        yield server
    assert server.invalid == [], "request bodies the 1.37 schemas refuse"
