"""The recipes (ImageNet-scale and Fashion-MNIST) name real classes with valid arguments and the paper's hyperparameters."""

import inspect
from pathlib import Path

import pytest
import yaml

from zoo.hparams import dataclass_from_dict
from zoo.registry import import_object

RECIPES = Path(__file__).resolve().parents[2] / "recipes" / "rcg"
CONFIG_CLASSES = {"encoder": "EncoderConfig", "rdm": "RDMConfig", "mage": "MAGEConfig", "vqgan": "VQGANConfig"}


def _load_class(path: str):
    module, _, name = path.rpartition(".")
    return import_object(f"{module}:{name}")


@pytest.mark.parametrize("recipe", sorted(p.name for p in RECIPES.glob("*.yaml")))
def test_recipe_arguments_are_valid(recipe):
    from zoo.rcg import model as rcg_model

    config = yaml.safe_load((RECIPES / recipe).read_text())
    for part in ("model", "data"):
        cls = _load_class(config[part]["class_path"])
        params = inspect.signature(cls.__init__).parameters
        args = config[part]["init_args"]
        assert set(args) <= set(params), (part, set(args) - set(params))
        for key, cfg_class in CONFIG_CLASSES.items():
            if part == "model" and isinstance(args.get(key), dict):
                dataclass_from_dict(getattr(rcg_model, cfg_class), args[key], key)  # unknown keys raise


def test_paper_hyperparameters():
    def args(name):
        return yaml.safe_load((RECIPES / name).read_text())

    mage_l = args("imagenet256_mage_l.yaml")
    m = mage_l["model"]["init_args"]
    assert (m["blr"], m["weight_decay"], m["betas"], m["warmup_epochs"]) == (1.5e-4, 0.05, [0.9, 0.95], 10)
    assert m["mage"]["rep_drop_prob"] == 0.1 and m["mage"]["mask_ratio_mu"] == 0.75
    assert (m["mage"]["embed_dim"], m["mage"]["depth"], m["mage"]["num_heads"]) == (1024, 24, 16)
    t = mage_l["trainer"]
    assert t["max_epochs"] == 200 and t["gradient_clip_val"] == 3.0
    assert t["devices"] * t["num_nodes"] * mage_l["data"]["init_args"]["batch_size"] == 4096
    rdm = args("imagenet256_rdm_vit_b.yaml")
    r = rdm["model"]["init_args"]
    assert (r["blr"], r["weight_decay"], rdm["trainer"]["max_epochs"]) == (1e-6, 0.01, 200)
    assert rdm["trainer"]["devices"] * rdm["data"]["init_args"]["batch_size"] == 512
    assert args("imagenet256_rdm_vit_l_classcond.yaml")["model"]["init_args"]["rdm"]["n_classes"] == 1000


def test_command_line_overrides_of_config_entries_are_read_as_values(tmp_path):
    """`zoo train fmnist_vqgan.yaml --model.init_args.vqgan.n_embed=1024` hands the dict entry over as the text
    "1024"; config.json holds the value it was read as, since zoo.load reads saved configs strictly."""
    import json

    import zoo
    from zoo.rcg.model import VQGANConfig
    from zoo.rcg.module import VQGANModule

    cfg = dataclass_from_dict(VQGANConfig, {"n_embed": "64", "ch_mult": "[1, 2]", "beta": "1e-1"}, "vqgan")
    assert (cfg.n_embed, cfg.ch_mult, cfg.beta) == (64, [1, 2], 0.1)
    module = VQGANModule(vqgan={"ch": 32, "ch_mult": "[1]", "num_res_blocks": 1, "z_channels": 4, "n_embed": "16"})
    module.save_pretrained(tmp_path)
    saved = json.loads((tmp_path / "config.json").read_text())["hparams"]["vqgan"]
    assert saved == {"ch": 32, "ch_mult": [1], "num_res_blocks": 1, "z_channels": 4, "n_embed": 16}
    assert zoo.load(tmp_path).vqgan.quantize.embedding.weight.shape[0] == 16
    for bad, message in (({"n_embed": "lots"}, "vqgan.n_embed must be int, got 'lots'"),
                         ({"n_embed": 2.5}, "vqgan.n_embed must be int, got 2.5"),
                         ({"ch_mult": [1, "a"]}, r"vqgan.ch_mult must be list\[int\]")):
        with pytest.raises(ValueError, match=message):
            dataclass_from_dict(VQGANConfig, bad, "vqgan")
