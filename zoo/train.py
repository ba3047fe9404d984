"""Recipes: LightningCLI YAML configs run by ``zoo train`` and ``zoo finetune``.

A recipe names a ZooModule and a LightningDataModule by ``class_path`` with their ``init_args`` and the
``trainer`` settings. OmegaConf interpolation (``${model.init_args.lr}``) works inside recipes and is resolved
after the command-line overrides (jsonargparse's, ``--trainer.max_steps=10``), so a path written as
``${trainer.default_root_dir}/checkpoints`` follows ``--trainer.default_root_dir``; the resolved config is saved
beside the checkpoints (``config.yaml`` in the run's log folder).
"""

from __future__ import annotations

import os
import warnings
from typing import Sequence

__all__ = ["run_recipe"]


def run_recipe(
    recipe: str | os.PathLike,
    overrides: Sequence[str] = (),
    *,
    init_from: str | None = None,
    ckpt_path: str | None = None,
):
    """Run ``fit`` for ``recipe``; with ``init_from`` (a zoo model name or folder), start from its weights.

    Returns the LightningCLI object (its ``model`` and ``trainer`` hold the result).
    """
    import lightning as L
    from lightning.pytorch.cli import LightningCLI
    from lightning.pytorch.utilities.exceptions import SIGTERMException

    from zoo.module import ZooModule

    if not os.path.isfile(recipe):
        raise FileNotFoundError(f"recipe {recipe} not found; recipes live in recipes/<method>/*.yaml")
    with warnings.catch_warnings():
        # the recipe and overrides come in `args`; sys.argv (`zoo train ...`) is never parsed, so Lightning's
        # warning about both being given does not apply
        warnings.filterwarnings("ignore", message="LightningCLI's args parameter is intended")
        cli = LightningCLI(
            ZooModule,
            L.LightningDataModule,
            subclass_mode_model=True,
            subclass_mode_data=True,
            # "omegaconf+": interpolations resolve after the command line, so overrides reach them
            parser_kwargs={"parser_mode": "omegaconf+"},
            save_config_kwargs={"overwrite": True},
            args=["--config", str(recipe), *overrides],
            run=False,
        )
    if init_from is not None:
        from zoo.loading import load

        pretrained = load(init_from)
        if type(pretrained) is not type(cli.model):
            raise ValueError(
                f"{init_from} is a {type(pretrained).__name__} but the recipe builds a {type(cli.model).__name__}; "
                "use a recipe for the same module"
            )
        own = cli.model.state_dict()
        # train in the recipe's precision even from a checkpoint published in bf16
        state = {k: v.to(dtype=own[k].dtype if k in own and v.is_floating_point() else v.dtype, copy=True)
                 for k, v in pretrained.pretrained_state_dict().items()}
        try:
            cli.model.load_weights_(state)
        except RuntimeError as err:
            raise ValueError(f"the recipe's architecture does not match {init_from}: {err}") from None
    # a datamodule may check its inputs before fit: the error comes once, before any DDP process starts
    if callable(check := getattr(cli.datamodule, "check_data", None)):
        check()
    try:
        cli.trainer.fit(cli.model, datamodule=cli.datamodule, ckpt_path=ckpt_path)
    except SIGTERMException:
        # Lightning exits 0 on SIGTERM; a script chaining `zoo train && zoo publish` must not publish a half run
        raise SystemExit(f"zoo: training stopped by SIGTERM at step {cli.trainer.global_step}; resume it with "
                         "--ckpt-path last (or the path of its last.ckpt)") from None
    _save_final_last(cli.trainer)
    return cli


def _save_final_last(trainer) -> None:
    """Write the final state as every ``save_last`` checkpoint callback's ``last.ckpt``.

    Lightning writes ``last.ckpt`` only at its triggers (every N steps, epoch ends) and not again when training
    ends after them, so ``zoo publish .../last.ckpt`` would publish weights from before the last steps."""
    import torch

    for callback in trainer.checkpoint_callbacks:
        if not (callback.save_last and callback.dirpath):
            continue
        path = os.path.join(callback.dirpath, callback.CHECKPOINT_NAME_LAST + callback.FILE_EXTENSION)
        # only when stale (a save at the final step already holds the final state); rank 0's file decides for
        # every rank, since saving is collective. mmap: the step is read without reading the weights
        saved = (torch.load(path, map_location="cpu", weights_only=True, mmap=True).get("global_step")
                 if trainer.is_global_zero and os.path.isfile(path) else None)
        if trainer.strategy.broadcast(saved) != trainer.global_step:
            trainer.save_checkpoint(path)
