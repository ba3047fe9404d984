import pytest
import toy  # noqa: F401  (registers the "toy" method these entries belong to)

import zoo
from zoo.registry import FileSpec, ModelEntry, UnknownModelError, get_entry, register_model

SHA = "0" * 64


def _entry(name, method="toy", **kw):
    return ModelEntry(name=name, method=method, files=(FileSpec("config.json", SHA, 1),), **kw)


def test_list_filters_by_pattern_and_method():
    for n in ("toy-alpha", "toy-beta", "toy-gamma-large"):
        register_model(_entry(n))
    names = zoo.list_models("toy-*")
    assert {"toy-alpha", "toy-beta", "toy-gamma-large"} <= set(names)
    assert names == sorted(names)
    assert zoo.list_models("toy-*-large") == ["toy-gamma-large"]
    assert "toy-alpha" in zoo.list_models(method="toy")
    with pytest.raises(KeyError, match="unknown method 'nope'"):
        zoo.list_models(method="nope")


def test_unknown_name_suggests_close_names():
    register_model(_entry("toy-alpha"))
    with pytest.raises(UnknownModelError) as err:
        get_entry("toy-alpah")
    assert "Did you mean: toy-alpha" in str(err.value)
    assert "zoo list" in str(err.value)


def test_one_did_you_mean_for_every_kind_of_name():
    """hparams.closest serves catalog names, recipes, hyperparameters, model types and card fields alike."""
    from zoo.hparams import check_arguments, closest
    from zoo.recipes import RecipeNotFoundError, find_recipe

    names = ["chess-small-av", "chess-small-bc", "escaip-tiny-emt", "rcg-imagenet256"]
    assert closest("chess-smal-av", names) == ["chess-small-av", "chess-small-bc"]  # close spellings, best first
    assert closest("TINY", names) == ["escaip-tiny-emt"] and closest("", names) == []  # else the names holding it
    assert closest("chess", names, n=1) == ["chess-small-av"]
    with pytest.raises(RecipeNotFoundError, match=r"Did you mean: escaip/tiny_emt.yaml\?"):
        find_recipe("tiny_emt")

    def build(hidden_size: int = 8) -> None: ...

    with pytest.raises(ValueError, match="'size': did you mean 'hidden_size'"):
        check_arguments(build, {"size": 4}, "hparams", "build")


def test_names_are_stable():
    register_model(_entry("toy-stable"))
    register_model(_entry("toy-stable"))  # same contents: fine
    with pytest.raises(ValueError, match="already registered"):
        register_model(_entry("toy-stable", license="mit"))


def test_info_is_plain_dict():
    register_model(_entry("toy-info", metrics={"mse": 0.5}))
    info = zoo.info("toy-info")
    assert info["metrics"] == {"mse": 0.5}
    assert info["files"] == [{"path": "config.json", "sha256": SHA, "size": 1, "url": None}]


@pytest.mark.parametrize(
    "kwargs, message",
    [
        ({"revision": "main"}, "a 40-hex id"),
        ({"files": ()}, "lists no files"),
        ({"upstream": (FileSpec("a.pt", None, None, url="https://example.org/a.pt"),)}, "need a converter"),
        ({"upstream": (FileSpec("a.pt", None, None),), "converter": "m:f"}, "needs an https://, hf:// or file:// url"),
        ({"files": (FileSpec("a", "abc", 1),)}, "64-hex sha256"),
        ({"files": (FileSpec("a", SHA, None),)}, "and a size"),
        ({"repo": "no-owner"}, "'owner/name'"),
    ],
)
def test_entry_validation(kwargs, message):
    base = dict(name="bad", method="toy", files=(FileSpec("a", SHA, 1),))
    with pytest.raises(ValueError, match=message):
        ModelEntry(**{**base, **kwargs})
