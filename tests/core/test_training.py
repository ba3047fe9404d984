import json
import logging
import sys
import warnings

import lightning as L
import pytest
import torch
import yaml
from toy import ToyData, ToyRegressor
from torch.utils.data import TensorDataset

import zoo
from zoo.cli import main
import zoo.lightning_compat as compat
from zoo.lightning_compat import EMAWeights, MidEpochResume
from zoo.train import run_recipe
from zoo.training import EMA, EpochSampler, ResumableBatchSampler, resumable_loader

RECIPE = str(__import__("pathlib").Path(__file__).parent / "recipes" / "toy.yaml")


def _trainer(tmp_path, **kw):
    return L.Trainer(max_steps=2, accelerator="cpu", logger=False, enable_checkpointing=False,
                     enable_progress_bar=False, enable_model_summary=False, default_root_dir=tmp_path, **kw)


def test_fit_a_loaded_model(tmp_path):
    ToyRegressor().save_pretrained(tmp_path / "repo")
    model = zoo.load(tmp_path / "repo")
    before = model.net[0].weight.clone()
    trainer = _trainer(tmp_path, devices=1)
    assert not model.training
    trainer.fit(model, datamodule=ToyData())
    assert trainer.global_step == 2
    assert model.training  # zoo.load returns eval mode; fitting switches to train mode
    assert not torch.equal(before, model.net[0].weight)


class _FrozenFirstLayer(ToyRegressor):
    """A module that trains with its first layer frozen, in eval mode by design."""

    def parts_in_eval_mode(self):
        return [self.net[0]]


class _AlsoEvalByMistake(_FrozenFirstLayer):
    def train(self, mode=True):
        super().train(mode)
        self.net[1].eval()  # not one of its parts_in_eval_mode
        return self


@pytest.mark.parametrize("module, warned", [(_FrozenFirstLayer, []), (_AlsoEvalByMistake, ["Found 2 module(s)"])])
def test_eval_mode_warning_only_for_modules_not_in_eval_by_design(tmp_path, module, warned):
    model = module()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        _trainer(tmp_path, devices=1).fit(model, datamodule=ToyData())
        assert not [f for f in warnings.filters if f[1] and "in eval mode" in f[1].pattern]  # gone after the fit
    assert not model.net[0].training and model.net[2].training  # the frozen part stayed in eval mode, the rest trained
    said = [str(w.message).split(" in eval mode")[0] for w in caught
            if "in eval mode at the start of training" in str(w.message)]
    assert said == warned


class _ReleaseProcessGroup(L.Callback):
    """Destroy the gloo process group before a spawned rank exits: left to interpreter shutdown, gloo's threads
    occasionally abort the rank ("terminate called without an active exception", SIGABRT; seen here under load)."""

    def teardown(self, trainer, pl_module, stage):
        if torch.distributed.is_initialized():
            torch.distributed.destroy_process_group()


def test_fit_a_loaded_model_ddp_spawn(tmp_path):
    ToyRegressor().save_pretrained(tmp_path / "repo")
    model = zoo.load(tmp_path / "repo")
    trainer = _trainer(tmp_path, devices=2, strategy="ddp_spawn", callbacks=[_ReleaseProcessGroup()])
    trainer.fit(model, datamodule=ToyData())
    assert "train_loss" in trainer.callback_metrics  # the spawned ranks trained and reported back
    assert not torch.equal(zoo.load(tmp_path / "repo").net[0].weight, model.net[0].weight)  # weights came back


def test_recipe_runs_and_saves_resolved_config(tmp_path):
    cli = run_recipe(RECIPE, [f"--trainer.default_root_dir={tmp_path}", "--model.init_args.lr=0.1"])
    assert cli.trainer.global_step == 2
    assert cli.model.hparams.lr == 0.1
    saved = yaml.safe_load(open(cli.trainer.log_dir + "/config.yaml"))
    assert saved["data"]["init_args"]["batch_size"] == 8  # interpolation resolved
    ckpts = list(tmp_path.rglob("*.ckpt"))
    assert ckpts
    ckpt = torch.load(ckpts[0], weights_only=True)  # plain containers only
    assert ckpt["zoo_model_type"] == "toy-mlp" and ckpt["hyper_parameters"]["lr"] == 0.1

    result = zoo.publish(str(ckpts[0]), tmp_path / "published")
    published = zoo.load(tmp_path / "published")
    assert torch.equal(published.net[0].weight, cli.model.net[0].weight.cpu())
    assert result["files"]["model.safetensors"]["size"] > 0


def test_command_line_overrides_reach_the_interpolations_that_use_them(tmp_path, monkeypatch):
    # interpolations resolve after the command line: a checkpoint folder written as
    # ${trainer.default_root_dir}/checkpoints follows --trainer.default_root_dir (it once stayed in the
    # recipe's runs/toy, and `--ckpt-path last` then resumed another run's checkpoint)
    monkeypatch.chdir(tmp_path)
    recipe = RECIPE.replace("toy.yaml", "toy_run_folder.yaml")
    cli = run_recipe(recipe, ["--trainer.default_root_dir=elsewhere", "--model.init_args.width=16"])
    assert (tmp_path / "elsewhere" / "checkpoints" / "last.ckpt").exists()
    assert not (tmp_path / "runs").exists()
    assert cli.datamodule.hparams.batch_size == 16
    saved = yaml.safe_load(open(cli.trainer.log_dir + "/config.yaml"))
    assert saved["trainer"]["callbacks"][0]["init_args"]["dirpath"] == "elsewhere/checkpoints"


def test_finetune_starts_from_pretrained_weights(tmp_path):
    pretrained = ToyRegressor(width=8)
    pretrained.save_pretrained(tmp_path / "repo")
    cli = run_recipe(RECIPE, [f"--trainer.default_root_dir={tmp_path}", "--trainer.max_steps=0"],
                     init_from=str(tmp_path / "repo"))
    assert torch.equal(cli.model.net[0].weight, pretrained.net[0].weight)
    # a base published in bf16 fine-tunes in the recipe's fp32, from exactly the stored values
    pretrained.to(torch.bfloat16).save_pretrained(tmp_path / "bf16")
    cli = run_recipe(RECIPE, [f"--trainer.default_root_dir={tmp_path}", "--trainer.max_steps=0"],
                     init_from=str(tmp_path / "bf16"))
    assert cli.model.net[0].weight.dtype == torch.float32
    assert torch.equal(cli.model.net[0].weight, pretrained.net[0].weight.float())
    with pytest.raises(ValueError, match="does not match"):
        run_recipe(RECIPE, [f"--trainer.default_root_dir={tmp_path}", "--model.init_args.width=4"],
                   init_from=str(tmp_path / "repo"))


def test_sigterm_fails_the_run_and_resuming_finishes_it(tmp_path):
    # Lightning ends fit() quietly on SIGTERM (exit status 0); `zoo train && zoo publish` must not publish that
    recipe = [f"--trainer.default_root_dir={tmp_path}", "--trainer.max_steps=6",
              "--trainer.callbacks+=ModelCheckpoint", "--trainer.callbacks.save_last=true",
              "--trainer.callbacks.every_n_train_steps=1"]
    with pytest.raises(SystemExit, match="stopped by SIGTERM at step 2; resume it with --ckpt-path"):
        run_recipe(RECIPE, [*recipe, "--trainer.callbacks+=toy.SigtermAtStep", "--trainer.callbacks.step=2"])
    last = next(tmp_path.rglob("last.ckpt"))
    assert torch.load(last, weights_only=True)["global_step"] == 2
    # zoo finetune resumes the same way (the checkpoint's weights win over the pretrained ones)
    ToyRegressor(width=8).save_pretrained(tmp_path / "repo")
    assert main(["finetune", str(tmp_path / "repo"), RECIPE, *recipe, "--ckpt-path", str(last)]) == 0
    assert max(torch.load(p, weights_only=True)["global_step"] for p in tmp_path.rglob("last.ckpt")) == 6


def test_last_checkpoint_holds_the_final_step(tmp_path):
    # a save trigger at step 4 of 6: Lightning alone would leave last.ckpt at step 4
    cli = run_recipe(RECIPE, [f"--trainer.default_root_dir={tmp_path}", "--trainer.max_steps=6",
                              "--trainer.callbacks+=ModelCheckpoint", "--trainer.callbacks.save_last=true",
                              f"--trainer.callbacks.dirpath={tmp_path / 'ckpts'}",
                              "--trainer.callbacks.every_n_train_steps=4"])
    last = torch.load(tmp_path / "ckpts" / "last.ckpt", weights_only=True)
    assert last["global_step"] == 6
    assert torch.equal(last["state_dict"]["net.0.weight"], cli.model.net[0].weight)


def _final_state(out: str) -> str:
    """The checkpoint `zoo train` names as the run's final state."""
    (line,) = [line for line in out.splitlines() if line.startswith("final state: ")]
    return line.split()[2]


def test_a_run_ends_with_its_final_state_saved_before_any_save_trigger(tmp_path, capsys):
    # the recipe saves every 100,000 steps, in a folder Lightning picks: the run's own log folder
    logged = logging.Handler()
    logged.emit = lambda record: seen.append(record.getMessage())
    seen: list[str] = []
    logging.getLogger("lightning.pytorch").addHandler(logged)
    try:
        assert main(["train", RECIPE, f"--trainer.default_root_dir={tmp_path}", "--trainer.max_steps=3",
                     "--trainer.callbacks+=ModelCheckpoint", "--trainer.callbacks.every_n_train_steps=100000"]) == 0
    finally:
        logging.getLogger("lightning.pytorch").removeHandler(logged)
    assert "`Trainer.fit` stopped: `max_steps=3` reached." in seen  # what Lightning logs is shown ...
    assert not [message for message in seen if "weights_only" in message]  # ... but no note on an unset weights_only
    final = _final_state(capsys.readouterr().out)
    assert final == str(tmp_path / "lightning_logs" / "version_0" / "checkpoints" / "last.ckpt")
    assert torch.load(final, weights_only=True)["global_step"] == 3


def test_train_then_finetune_publishes_the_finetune(tmp_path, capfd, monkeypatch):
    # README's chain: `zoo train`, `zoo finetune` of a model with the same recipe, `zoo publish` of the last.ckpt
    monkeypatch.chdir(tmp_path)
    recipe = RECIPE.replace("toy.yaml", "toy_run_folder.yaml")
    assert main(["train", recipe]) == 0
    trained = _final_state(capfd.readouterr().out)
    ToyRegressor(width=8).save_pretrained("pretrained")
    written = sorted(tmp_path.rglob("*"))
    # the same folder: refused before anything is set up, as one line
    assert main(["finetune", "pretrained", recipe]) == 2
    out, err = capfd.readouterr()
    assert err.startswith("zoo: error: ") and err.count("\n") == 1 and not out
    assert "runs/toy/checkpoints holds the checkpoints of an earlier run" in err
    assert "--trainer.default_root_dir=ANOTHER_FOLDER" in err
    assert sorted(tmp_path.rglob("*")) == written
    assert main(["finetune", "pretrained", recipe, "--trainer.default_root_dir=runs/ft"]) == 0
    tuned = _final_state(capfd.readouterr().out)
    assert tuned == str(tmp_path / "runs" / "ft" / "checkpoints" / "last.ckpt")
    assert main(["publish", tuned, "published"]) == 0
    published = zoo.load("published").net[0].weight
    assert torch.equal(published, torch.load(tuned, weights_only=True)["state_dict"]["net.0.weight"])
    assert not torch.equal(published, torch.load(trained, weights_only=True)["state_dict"]["net.0.weight"])
    # resuming writes into the run's own folder
    assert main(["train", recipe, "--trainer.max_steps=4", "--ckpt-path", "last"]) == 0
    assert torch.load(_final_state(capfd.readouterr().out), weights_only=True)["global_step"] == 4


def test_finetune_with_a_recipe_for_another_module_is_one_error(tmp_path, capfd):
    assert main(["finetune", "escaip-tiny-emt", RECIPE, f"--trainer.default_root_dir={tmp_path / 'run'}"]) == 2
    out, err = capfd.readouterr()
    assert not out and err.count("\n") == 1
    assert err.startswith("zoo: error: escaip-tiny-emt is model_type 'escaip' (EScAIPModule), but the recipe trains "
                          "model_type 'toy-mlp' (ToyRegressor): use a recipe for 'escaip' models")
    assert not (tmp_path / "run").exists()


@pytest.mark.parametrize("held", ["another-method", None, "missing"])
def test_resuming_from_a_checkpoint_of_another_module_is_one_error(tmp_path, capfd, held):
    ckpt = tmp_path / "other.ckpt"
    if held != "missing":
        torch.save({"zoo_model_type": held, "state_dict": {}} if held else {"state_dict": {}}, ckpt)
    assert main(["train", RECIPE, f"--trainer.default_root_dir={tmp_path / 'run'}", "--ckpt-path", str(ckpt)]) == 2
    out, err = capfd.readouterr()
    assert not out and err.count("\n") == 1
    assert err.startswith(f"zoo: error: checkpoint {ckpt} does not exist" if held == "missing" else
                          f"zoo: error: {ckpt} holds {f'model_type {held!r}' if held else 'no zoo module'}, but the "
                          "recipe trains model_type 'toy-mlp' (ToyRegressor)")
    assert not (tmp_path / "run").exists()


def test_cli_train_and_publish(tmp_path, capsys, monkeypatch):
    args = ["train", RECIPE, f"--trainer.default_root_dir={tmp_path}"]
    monkeypatch.setattr(sys, "argv", ["zoo", *args])  # as from the shell
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        assert main(args) == 0
    assert not [w for w in caught if "args parameter" in str(w.message)]  # sys.argv is not LightningCLI's input
    ckpt = next(tmp_path.rglob("*.ckpt"))
    assert main(["publish", str(ckpt), str(tmp_path / "out")]) == 0
    out = capsys.readouterr().out
    assert "model.safetensors" in out and "sha256" in out
    assert json.loads((tmp_path / "out" / "config.json").read_text())["model_type"] == "toy-mlp"
    assert main(["load", str(tmp_path / "out")]) == 0
    assert "ToyRegressor (toy-mlp)" in capsys.readouterr().out


def test_ema_update_rule():
    net = torch.nn.Linear(2, 2)
    ema = EMA(net, decay=0.9999)
    shadow0 = ema.shadow.weight.detach().clone()
    with torch.no_grad():
        net.weight.add_(1.0)
    ema.update(net)  # n = 1: decay = min(0.9999, 2 / 11)
    decay = 2 / 11
    expected = shadow0 - (1 - decay) * (shadow0 - net.weight)
    assert torch.allclose(ema.shadow.weight, expected)
    assert int(ema.num_updates) == 1


def test_ema_weights_average_by_the_ema_rule_and_end_as_the_average(tmp_path):
    """EMAWeights (Lightning's WeightAveraging) averages as EMA does from the first update on, and swaps the
    average in after fit."""
    class Mirror(L.Callback):  # an EMA updated from the same raw weights after each step
        def on_train_start(self, trainer, pl_module):
            self.ema = EMA(pl_module.net, decay=0.9)

        def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_idx):
            self.ema.update(pl_module.net)

    torch.manual_seed(0)
    model, averaging, mirror = ToyRegressor(), EMAWeights(0.9, attribute="net"), Mirror()
    _trainer(tmp_path, callbacks=[averaging, mirror]).fit(model, datamodule=ToyData())  # 2 steps
    assert averaging.num_updates == int(mirror.ema.num_updates) == 2
    for name, value in mirror.ema.shadow.named_parameters():
        assert torch.equal(model.net.get_parameter(name), value), name


def test_the_lightning_workarounds_switch_off_outside_the_releases_they_are_tested_on(monkeypatch):
    from types import SimpleNamespace as Obj

    def stopped_by_max_steps():  # the fit loop's progress as Lightning saves it after max_steps stopped epoch 0
        counts = {"ready": 1, "started": 1, "processed": 1, "completed": 1}
        return {"epoch": 1, "loops": {"fit_loop": {
            "epoch_progress": {"total": dict(counts), "current": dict(counts)},
            "epoch_loop.batch_progress": {"current": dict(counts, processed=3), "is_last_batch": False}}}}

    batches = Obj(current=Obj(processed=3), is_last_batch=False)
    data = MidEpochResume()
    data.trainer = Obj(state=Obj(fn="fit"), train_dataloader=Obj(batch_sampler=Obj(pass_epoch=0)),
                       fit_loop=Obj(epoch_loop=Obj(batch_progress=batches)))
    assert compat.installed_in(compat.WORKAROUNDS_TESTED)  # else the resume tests here fail: check them, widen it
    fixed = stopped_by_max_steps()
    compat.resume_where_fit_stopped(fixed)
    assert fixed != stopped_by_max_steps() and data.state_dict() == {"epoch": 0, "batches_done": 3, "epoch_done": False}
    monkeypatch.setattr(compat, "_WORKAROUNDS_ON", False)
    as_saved = stopped_by_max_steps()
    compat.resume_where_fit_stopped(as_saved)
    assert as_saved == stopped_by_max_steps() and data.state_dict() == {}


class _Shard:
    """A rank's distributed sampler as Lightning injects it under DDP: only its epoch, num_replicas and rank count."""

    def __init__(self, rank: int, num_replicas: int = 2, epoch: int = 0):
        self.rank, self.num_replicas, self.epoch = rank, num_replicas, epoch


@pytest.mark.parametrize("drop_last", [False, True])
def test_resumable_batches_shuffle_by_epoch_deal_ranks_and_resume(drop_last):
    sampler = EpochSampler(range(10))
    batches = ResumableBatchSampler(sampler, 10, batch_size=3, drop_last=drop_last, seed=4)
    epoch0 = list(batches)
    assert len(epoch0) == len(batches) == (3 if drop_last else 4)
    assert [len(b) for b in epoch0] == [3, 3, 3] + ([] if drop_last else [1])
    flat = [i for b in epoch0 for i in b]
    assert len(set(flat)) == len(flat) == (9 if drop_last else 10)
    assert list(batches) == epoch0  # the order is the epoch's, not a fresh draw
    sampler.set_epoch(1)  # as Lightning does each epoch
    epoch1 = list(batches)
    assert epoch1 != epoch0 and epoch1 == list(ResumableBatchSampler(_Shard(0, 1, epoch=1), 10, 3, drop_last, seed=4))
    assert list(ResumableBatchSampler(None, 10, 3, drop_last, shuffle=False))[0] == [0, 1, 2]
    # resumed at batch 2 of epoch 1: that pass only goes on from there, the next one is whole
    resumed = ResumableBatchSampler(sampler, 10, 3, drop_last, seed=4, resume_at=(1, 2))
    assert list(resumed) == epoch1[2:] and list(resumed) == epoch1
    # resuming as epoch 1 (as Lightning does after max_steps stopped epoch 0), the pass finishes epoch 0
    resumed = ResumableBatchSampler(sampler, 10, 3, drop_last, seed=4, resume_at=(0, 2))
    assert list(resumed) == epoch0[2:] and list(resumed) == epoch1
    # DDP: two ranks deal out whole batches of the one global batching, as many each as len() says
    ranks = [ResumableBatchSampler(_Shard(r, epoch=1), 10, 3, drop_last, seed=4) for r in (0, 1)]
    dealt = [list(r) for r in ranks]
    assert len(dealt[0]) == len(dealt[1]) == len(ranks[0]) == (1 if drop_last else 2)
    assert [b for pair in zip(*dealt) for b in pair] == (epoch1[:2] if drop_last else epoch1)


class ResumableToyData(MidEpochResume, ToyData):
    def train_dataloader(self):
        x, y = super().train_dataloader().dataset.tensors
        return resumable_loader(TensorDataset(x, y), self.hparams.batch_size, shuffle=True,
                                resume_at=self.take_resume_at())


def test_a_run_killed_mid_epoch_or_extended_goes_on_as_if_it_never_stopped(tmp_path):
    from lightning.pytorch.callbacks import ModelCheckpoint

    class Killed(Exception):
        pass

    class Record(L.Callback):
        def __init__(self, seen: list, kill_at: int | None):
            self.seen, self.kill_at = seen, kill_at

        def on_train_batch_start(self, trainer, pl_module, batch, batch_idx):
            if trainer.global_step == self.kill_at:
                raise Killed  # as a killed job: nothing more is saved
            self.seen.append((trainer.current_epoch, batch[0][:, 0].tolist()))

    def run(seen: list, steps=20, kill_at=None, ckpt_path=None, final=None):
        torch.manual_seed(0)
        model = ToyRegressor()
        last = ModelCheckpoint(dirpath=tmp_path / "ckpt", save_last=True, every_n_train_steps=3)
        trainer = L.Trainer(accelerator="cpu", logger=False, enable_progress_bar=False, enable_model_summary=False,
                            max_steps=steps, callbacks=[Record(seen, kill_at), last])
        trainer.fit(model, datamodule=ResumableToyData(n=64, batch_size=8), ckpt_path=ckpt_path)  # 8 batches an epoch
        if final:
            trainer.save_checkpoint(final)  # as `zoo train` writes last.ckpt when fit ends
        return model.state_dict()

    straight, first, rest = [], [], []
    weights = run(straight)
    assert [x for _, x in straight[8:16]] != [x for _, x in straight[:8]]  # each epoch its own order
    (tmp_path / "ckpt" / "last.ckpt").unlink()
    with pytest.raises(Killed):
        run(first, kill_at=14)  # in epoch 1; the last checkpoint is at step 12
    resumed = run(rest, ckpt_path=tmp_path / "ckpt" / "last.ckpt")
    assert first[:12] + rest == straight
    for name, value in weights.items():
        torch.testing.assert_close(resumed[name], value, msg=name)

    # A run that max_steps ends inside epoch 0, at its end, inside epoch 1, each time given more steps: Lightning
    # counts a stopped epoch as ended, yet goes on from its batch n; the saved state makes it the same run
    extended, final = [], None
    for steps in (5, 8, 13, 20):
        weights_now = run(extended, steps=steps, ckpt_path=final, final=tmp_path / "final.ckpt")
        final = tmp_path / "final.ckpt"
    assert extended == straight
    for name, value in weights.items():
        torch.testing.assert_close(weights_now[name], value, msg=name)
