"""Fixtures the cleanup attacks share: days pass at once on a store whose
clock starts at this machine's (so that a dry run, which ages by this
machine's clock, agrees with the store). Modules that want the store's clock
elsewhere, or a plain scripted store, define their own."""

from __future__ import annotations

import time

import pytest

from arrowlog.storage import Store
from arrowlog.testing.scripted import ScriptedStore
from tests.support.clocks import Clocks, ClockStore


@pytest.fixture
def clock(store: Store) -> ClockStore:
    return ClockStore(store, start_ms=int(time.time() * 1000))


@pytest.fixture
def clocks(clock: ClockStore, monkeypatch: pytest.MonkeyPatch) -> Clocks:
    return Clocks(clock, monkeypatch)


@pytest.fixture
def scripted(clock: ClockStore) -> ScriptedStore:
    return ScriptedStore(clock)
