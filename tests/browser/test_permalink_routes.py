"""The permalink API (no browser needed): save, load, same id for the same state, errors in the
integration guide's shape for bad input."""

from __future__ import annotations

import pytest
from fastapi import FastAPI
from fastapi.testclient import TestClient

from mirai.explorer.permalinks_store import PermalinkStore
from mirai.explorer.routes import deps, permalinks

STATE = {
    "version": 1,
    "language": "pytorch",
    "code": "import torch\n",
    "panes": [{"irType": "torch_mlir", "steps": [], "dumpAfterEach": False}],
}


@pytest.fixture()
def client(tmp_path):
    app = FastAPI()
    app.include_router(permalinks.router)
    store = PermalinkStore(tmp_path / "permalinks.sqlite3")
    app.dependency_overrides[deps.get_permalink_store] = lambda: store
    return TestClient(app)


def test_save_and_load(client):
    saved = client.post("/permalinks", json={"state": STATE}).json()
    assert saved["status"] == "ok"
    assert len(saved["id"]) == 10
    loaded = client.get(f"/permalinks/{saved['id']}").json()
    assert loaded == {"status": "ok", "id": saved["id"], "state": STATE}


def test_same_state_same_id_other_state_other_id(client):
    first = client.post("/permalinks", json={"state": STATE}).json()["id"]
    again = client.post("/permalinks", json={"state": dict(reversed(STATE.items()))}).json()["id"]
    other = client.post("/permalinks", json={"state": {**STATE, "code": "x"}}).json()["id"]
    assert first == again != other


def test_unknown_fields_are_ignored(client):
    r = client.post("/permalinks", json={"state": STATE, "client": "other"})
    assert r.json()["status"] == "ok"


@pytest.mark.parametrize(
    "body, message",
    [
        (b"{not json", "malformed JSON"),
        (b"[1, 2]", "expected a JSON object with a 'state' object"),
        (b'{"state": "text"}', "expected a JSON object with a 'state' object"),
        (b"{}", "expected a JSON object with a 'state' object"),
    ],
)
def test_bad_input_answers_in_the_guides_shape(client, body, message):
    r = client.post("/permalinks", content=body, headers={"Content-Type": "application/json"})
    assert r.status_code == 400
    assert r.json()["status"] == "error"
    assert r.json()["message"] == message
    assert set(r.json()) == {"status", "message", "detail"}


def test_too_large_state(client):
    r = client.post("/permalinks", json={"state": {"code": "x" * (2 << 20)}})
    assert r.status_code == 413
    assert r.json()["message"] == "page state too large"


def test_unknown_and_malformed_ids(client):
    missing = client.get("/permalinks/AAAAAAAAAA")
    assert missing.status_code == 404
    assert missing.json()["message"] == "permalink not found"
    bad = client.get("/permalinks/not_an_id")
    assert bad.status_code == 400
    assert bad.json()["message"] == "malformed permalink id"


def test_store_path_from_env(tmp_path, monkeypatch):
    from mirai.explorer.permalinks_store import ENV_VAR, default_db_path

    monkeypatch.setenv(ENV_VAR, str(tmp_path / "x.sqlite3"))
    assert default_db_path() == tmp_path / "x.sqlite3"
    monkeypatch.delenv(ENV_VAR)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    assert default_db_path() == tmp_path / "mirai" / "permalinks.sqlite3"
