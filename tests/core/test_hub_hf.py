"""The Hugging Face path end to end, against the loopback Hub (tests/hubserver.py) with the real client."""

import pytest
from core_testdata import hf_blob_names, publish_pinned, same_weights
from huggingface_hub import ModelCard
from toy import ToyRegressor

import zoo
from zoo.hub import IntegrityError, OfflineError
from zoo.registry import FileSpec, ModelEntry, register_model

CARD = {"name": "toy-hf", "description": "A toy regressor.", "license": "mit", "datasets": ["random"],
        "metrics": [{"name": "mse", "value": 0.125, "dataset": "random", "split": "test"}]}


def test_round_trip_folder_hub_cache_offline(hub, tmp_path, monkeypatch):
    model = ToyRegressor(width=8)
    folder = zoo.publish(model, tmp_path / "toy-hf", card=CARD)
    _, entry = publish_pinned("toy-hf", model, card=CARD)
    assert FileSpec("model.safetensors", **folder["files"]["model.safetensors"]) in entry.files  # same bytes both ways

    from_folder = zoo.load(tmp_path / "toy-hf")
    from_hub = zoo.load("toy-hf")
    hub.reset_requests()
    from_cache = zoo.load("toy-hf")
    assert hub.requests == []  # pinned commit + cached files: no network call at all
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    offline = zoo.load("toy-hf")
    assert hub.requests == []
    for loaded in (from_folder, from_hub, from_cache, offline):
        assert same_weights(model, loaded)

    card = ModelCard.load(tmp_path / "toy-hf" / "README.md")
    assert card.data.library_name == "zoo" and card.data.license == "mit"
    assert card.data.datasets == ["random"] and card.data.tags == ["toy", "toy-mlp"]
    result = card.data.eval_results[0]  # the model-index parsed back: task, dataset, split, metric
    assert (card.data.model_name, result.task_type, result.dataset_name, result.dataset_split) == \
        ("toy-hf", "other", "random", "test")
    assert (result.metric_type, result.metric_value) == ("mse", 0.125)


def test_hf_uri_and_revisions(hub, monkeypatch):
    first, entry = publish_pinned("toy-rev")
    second = ToyRegressor(width=8)
    zoo.publish(second, "hf://user/toy-rev")
    assert same_weights(second, zoo.load("hf://user/toy-rev"))  # main moved
    assert same_weights(first, zoo.load("hf://user/toy-rev", revision=entry.revision))
    assert same_weights(first, zoo.load("toy-rev"))  # the catalog stays on its pin
    assert same_weights(second, zoo.load("toy-rev", revision="main"))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    hub.reset_requests()
    assert same_weights(first, zoo.load(f"hf://user/toy-rev@{entry.revision}"))
    assert hub.requests == []


def test_tampered_file_is_never_loaded(hub, isolated_caches):
    _, entry = publish_pinned("toy-tamper")
    hub.tamper("model.safetensors", repo_id="user/toy-tamper")
    with pytest.raises(IntegrityError, match="model.safetensors: content does not match") as err:
        zoo.load("toy-tamper")
    sha = next(f.sha256 for f in entry.files if f.path == "model.safetensors")
    assert sha in str(err.value)
    assert sha not in hf_blob_names(isolated_caches, "user/toy-tamper")  # no bad cache entry
    hub.clear_faults()
    zoo.load("toy-tamper")
    assert sha in hf_blob_names(isolated_caches, "user/toy-tamper")


def test_truncated_file_is_never_loaded(hub, isolated_caches, monkeypatch):
    monkeypatch.setattr("time.sleep", lambda s: None)  # the client's retry pauses
    publish_pinned("toy-trunc")
    hub.truncate("model.safetensors", keep=100, repo_id="user/toy-trunc")
    with pytest.raises(Exception):
        zoo.load("toy-trunc")
    leftovers = [n for n in hf_blob_names(isolated_caches, "user/toy-trunc") if n.endswith(".incomplete")]
    assert leftovers == []
    hub.clear_faults()
    zoo.load("toy-trunc")


def test_offline_without_cache(hub, monkeypatch):
    publish_pinned("toy-away")
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    hub.reset_requests()
    with pytest.raises(OfflineError, match="zoo download toy-away") as err:
        zoo.load("toy-away")
    assert "user/toy-away@" in str(err.value) and "ZOO_HF_CACHE" in str(err.value)
    assert hub.requests == []
    with pytest.raises(OfflineError, match="zoo download hf://user/nothing"):
        zoo.load("hf://user/nothing")


def test_unreachable_hub_without_cache(monkeypatch):
    monkeypatch.setenv("ZOO_HF_ENDPOINT", "http://127.0.0.1:9")
    monkeypatch.setattr("time.sleep", lambda s: None)
    register_model(ModelEntry(name="toy-nonet", method="toy", repo="user/x", revision="a" * 40,
                              files=(FileSpec("config.json", "b" * 64, 10),)))
    with pytest.raises(OfflineError, match="cannot reach the Hub at http://127.0.0.1:9"):
        zoo.load("toy-nonet")


def test_no_network_and_no_mirror_is_one_quick_error_naming_zoo_hub_and_the_cache(isolated_caches, monkeypatch,
                                                                                 tmp_path):
    # an installed zoo (no hub/ beside the package) whose Hub cannot be reached: huggingface_hub alone retries each
    # file for ~25 s, and the error once sent the user into site-packages/hub/
    import time

    import zoo.settings

    monkeypatch.delenv("ZOO_HUB", raising=False)
    for proxy in ("HTTPS_PROXY", "https_proxy", "HTTP_PROXY", "http_proxy", "ALL_PROXY", "all_proxy"):
        monkeypatch.delenv(proxy, raising=False)
    monkeypatch.setattr(zoo.settings, "__file__", str(tmp_path / "site-packages" / "zoo" / "settings.py"))
    monkeypatch.setenv("ZOO_HF_ENDPOINT", "http://127.0.0.1:9")
    register_model(ModelEntry(name="toy-nomirror", method="toy", repo="user/x", revision="a" * 40,
                              files=(FileSpec("config.json", "b" * 64, 10),)))
    start = time.monotonic()
    with pytest.raises(OfflineError, match="cannot reach the Hub at http://127.0.0.1:9") as err:
        zoo.load("toy-nomirror")
    assert time.monotonic() - start < 5
    message = str(err.value)
    assert "set ZOO_HUB to a mirror folder holding the repo as toy-nomirror/" in message
    assert f"copy its HF cache to {isolated_caches / 'hf'}" in message and "site-packages" not in message


def test_no_network_fails_hf_loads_at_once(hub, isolated_caches, monkeypatch):
    # hf:// repos and official files hosted on the Hub: one connection attempt, not huggingface_hub's ~25 s of
    # retries per file; an official file the HF cache still holds (its pin in ZOO_HOME gone) loads from there
    import shutil
    import time

    from core_testdata import official_toy_on_the_hub

    for proxy in ("HTTPS_PROXY", "https_proxy", "HTTP_PROXY", "http_proxy", "ALL_PROXY", "all_proxy"):
        monkeypatch.delenv(proxy, raising=False)
    model, _ = official_toy_on_the_hub(hub, "toy-hf-official")
    zoo.load("toy-hf-official")
    shutil.rmtree(isolated_caches / "zoo")
    monkeypatch.setenv("ZOO_HF_ENDPOINT", "http://127.0.0.1:9")
    assert same_weights(model, zoo.load("toy-hf-official"))
    shutil.rmtree(isolated_caches / "hf" / "models--authors--official")
    start = time.monotonic()
    with pytest.raises(OfflineError, match=r"toy-hf-official' is not on this machine .*\(cannot reach the Hub at "
                                           r"http://127\.0\.0\.1:9: "):
        zoo.load("toy-hf-official")
    with pytest.raises(OfflineError, match=r"hf://user/never-seen@main was never downloaded here and the Hub is out "
                                           r"of reach \(cannot reach the Hub at http://127\.0\.0\.1:9: "):
        zoo.load("hf://user/never-seen")
    assert time.monotonic() - start < 5
