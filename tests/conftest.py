import os
import sys
import threading
from pathlib import Path

import pytest

TESTS = Path(__file__).resolve().parent
sys.path.insert(0, str(TESTS))
os.environ.setdefault("HF_HUB_DISABLE_XET", "1")
os.environ.setdefault("HF_HUB_DISABLE_TELEMETRY", "1")


@pytest.fixture(autouse=True)
def isolated_caches(tmp_path_factory, monkeypatch):
    """Every test gets its own zoo home and HF cache; nothing leaks into ~/.cache."""
    root = tmp_path_factory.mktemp("caches")
    monkeypatch.setenv("ZOO_HOME", str(root / "zoo"))
    monkeypatch.setenv("ZOO_HF_CACHE", str(root / "hf"))
    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    monkeypatch.delenv("ZOO_OFFLINE", raising=False)
    yield root


@pytest.fixture
def hub(monkeypatch):
    """A fresh loopback Hub (tests/hubserver.py) per test, with the zoo pointed at it and a token that may write."""
    from hubserver import HubServer

    server = HubServer().start()
    monkeypatch.setenv("ZOO_HF_ENDPOINT", server.endpoint)
    monkeypatch.setenv("HF_TOKEN", "dummy")
    yield server
    server.close()


@pytest.fixture
def file_server(monkeypatch):
    """A loopback file server (tests/fileserver.py) for upstream downloads; retry pauses are logged in ``.pauses``
    instead of slept."""
    from fileserver import FileServer

    server = FileServer()
    server.pauses = []
    monkeypatch.setattr("time.sleep", server.pauses.append)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield server
    server.shutdown()
