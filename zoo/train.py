"""Recipes: LightningCLI YAML configs run by ``zoo train`` and ``zoo finetune``.

A recipe names a ZooModule and a LightningDataModule by ``class_path`` with their ``init_args`` and the
``trainer`` settings. OmegaConf interpolations (``${trainer.default_root_dir}/checkpoints``) resolve after the
command-line overrides (``--trainer.default_root_dir=...``). Every run ends with its final state saved in each
checkpoint folder (:func:`final_checkpoints`), and only resuming (``--ckpt-path``) writes into an earlier run's.
"""

from __future__ import annotations

import contextlib
import functools
import logging
import os
import warnings
from collections.abc import Iterator
from typing import Sequence

from zoo.errors import InputError, ZooError

__all__ = ["run_recipe", "final_checkpoints"]

# where Lightning logs what it sets up (accelerator, logger, seed)
_LIGHTNING_LOGGERS = ("lightning.pytorch", "lightning.fabric")


def run_recipe(recipe: str | os.PathLike, overrides: Sequence[str] = (), *, init_from: str | None = None,
               ckpt_path: str | None = None):
    """Run ``fit`` for ``recipe``; with ``init_from`` (a zoo model name or folder), start from its weights.

    Every input is checked before training starts (the model against the recipe, the checkpoint to resume, the
    checkpoint folders, the data), and Lightning's set-up messages are shown only once they pass: a bad input is one
    error. Returns the LightningCLI object (its ``model`` and ``trainer`` hold the result).
    """
    from zoo._lightning import L, LightningCLI, SIGTERMException
    from zoo.module import ZooModule

    if not os.path.isfile(recipe):  # a shipped recipe by name (escaip/finetune_molecule), or one clear error
        from zoo.recipes import find_recipe

        recipe = find_recipe(os.fspath(recipe))
    with _setup_messages_held_back(), warnings.catch_warnings():
        # the recipe and overrides come in `args`; sys.argv (`zoo train ...`) is never parsed, so Lightning's
        # warning about both being given does not apply
        warnings.filterwarnings("ignore", message="LightningCLI's args parameter is intended")
        cli = LightningCLI(ZooModule, L.LightningDataModule, subclass_mode_model=True, subclass_mode_data=True,
                           # "omegaconf+": interpolations resolve after the command line, so overrides reach them
                           parser_kwargs={"parser_mode": "omegaconf+"}, save_config_kwargs={"overwrite": True},
                           args=["--config", str(recipe), *overrides], run=False)
        if init_from is not None:
            _start_from(cli.model, init_from)
        if ckpt_path is None:
            _check_checkpoint_folders_unused(cli.trainer)
        else:
            _check_resumes(cli.model, ckpt_path)
        # a datamodule may check its inputs before fit: the error comes once, before any DDP process starts
        if callable(check := getattr(cli.datamodule, "check_data", None)):
            check()
    try:
        cli.trainer.fit(cli.model, datamodule=cli.datamodule, ckpt_path=ckpt_path)
    except SIGTERMException:
        # Lightning exits 0 on SIGTERM; a script chaining `zoo train && zoo publish` must not publish a half run
        raise SystemExit(f"zoo: training stopped by SIGTERM at step {cli.trainer.global_step}; resume it with "
                         "--ckpt-path last (or the path of its last.ckpt)") from None
    _save_final_state(cli.trainer)
    return cli


def _start_from(model, init_from: str) -> None:
    """Load the weights of the zoo model ``init_from`` into the recipe's ``model``, in the recipe's precision."""
    from zoo import load

    pretrained = load(init_from)
    if type(pretrained) is not type(model):
        raise InputError(f"{init_from} is model_type {pretrained.model_type!r} ({type(pretrained).__name__}), but the "
                         f"recipe trains model_type {model.model_type!r} ({type(model).__name__}): use a recipe for "
                         f"{pretrained.model_type!r} models (`zoo recipe` lists them)")
    own = model.state_dict()
    # train in the recipe's precision even from a checkpoint published in bf16
    state = {k: v.to(dtype=own[k].dtype if k in own and v.is_floating_point() else v.dtype, copy=True)
             for k, v in pretrained.pretrained_state_dict().items()}
    try:
        model.load_weights_(state)
    except RuntimeError as err:
        raise ValueError(f"the recipe's architecture does not match {init_from}: {err}") from None
    ours, theirs = model.architecture(), pretrained.architecture()
    changed = sorted(k for k in ours.keys() | theirs.keys() if ours.get(k) != theirs.get(k))
    if changed:
        raise ValueError(f"the recipe's model differs from {init_from} in options that change no weight shape: "
                         + ", ".join(f"{k}={theirs.get(k)!r} in the model, {ours.get(k)!r} in the recipe" for k in changed)
                         + "; set the model's values in the recipe")


def _check_resumes(model, ckpt_path: str) -> None:
    """A checkpoint file to resume from exists and holds the recipe's kind of module (Lightning's own names for
    checkpoints, ``last`` and the like, and remote URLs are left to Lightning)."""
    from zoo.convert import safe_torch_load

    if ckpt_path in ("last", "best", "hpc", "registry") or "://" in ckpt_path:
        return
    if not os.path.isfile(ckpt_path):
        raise FileNotFoundError(f"checkpoint {ckpt_path} does not exist: pass a .ckpt file of this recipe's runs, "
                                "or --ckpt-path last")
    model_type = safe_torch_load(ckpt_path, what="a Lightning checkpoint").get("zoo_model_type")
    if model_type != model.model_type:
        held = f"model_type {model_type!r}" if model_type else "no zoo module"
        raise InputError(f"{ckpt_path} holds {held}, but the recipe trains model_type {model.model_type!r} "
                         f"({type(model).__name__}): resume from a checkpoint of this recipe's runs")


def _check_checkpoint_folders_unused(trainer) -> None:
    """A new run writes no checkpoint into a folder holding an earlier run's: Lightning would name its files
    ``last-v1.ckpt`` beside the other run's ``last.ckpt``. (A folder Lightning picks itself, in the run's own log
    folder, is set only when fit starts.)"""
    for callback in trainer.checkpoint_callbacks:
        folder = callback.dirpath
        if folder and os.path.isdir(folder) and any(n.endswith(callback.FILE_EXTENSION) for n in os.listdir(folder)):
            root = os.path.abspath(trainer.default_root_dir)
            moves = os.path.commonpath([root, os.path.abspath(folder)]) == root
            elsewhere = ("--trainer.default_root_dir=ANOTHER_FOLDER" if moves
                         else "another dirpath for the recipe's ModelCheckpoint")
            raise ZooError(f"{folder} holds the checkpoints of an earlier run: resume that run with --ckpt-path last, "
                           f"or give this one its own folder with {elsewhere} (or remove {folder})")


def final_checkpoints(trainer) -> list[str]:
    """The run's final state, one file per checkpoint folder: a checkpoint the folder's callback saved at the run's
    last step (``last.ckpt`` first), else ``last.ckpt`` there, which :func:`_save_final_state` writes. The folders
    are the checkpoint callbacks' (those Lightning picks are in the run's own log folder), or ``checkpoints/`` of the
    run's log folder when there is none."""
    from zoo._lightning import ModelCheckpoint

    final = []
    for callback in [c for c in trainer.checkpoint_callbacks if c.dirpath] or [None]:
        kind = callback or ModelCheckpoint
        folder = (callback.dirpath if callback else
                  os.path.join(trainer.log_dir or trainer.default_root_dir, "checkpoints"))
        last = os.path.join(folder, kind.CHECKPOINT_NAME_LAST + kind.FILE_EXTENSION)
        saved = [last, *((callback.last_model_path, callback.best_model_path, *callback.best_k_models) if callback
                         else ())]
        final.append(next((path for path in dict.fromkeys(saved) if _saved_step(path) == trainer.global_step), last))
    return list(dict.fromkeys(final))


def _saved_step(path: str) -> int | None:
    """The step the checkpoint ``path`` was saved at, None where there is none; read once per version of the file."""
    if not path or not os.path.isfile(path):
        return None
    stat = os.stat(path)
    return _read_step(path, stat.st_mtime_ns, stat.st_size)


@functools.cache
def _read_step(path: str, mtime_ns: int, size: int) -> int | None:
    import torch

    # mmap: the step is read without reading the weights
    return torch.load(path, map_location="cpu", weights_only=True, mmap=True).get("global_step")


def _save_final_state(trainer) -> None:
    """Save the final state where :func:`final_checkpoints` says, unless a checkpoint there holds it already.

    Lightning saves only at its triggers (every N steps, epoch ends), not again when training ends after them, and
    not at all before a recipe's first trigger (say every 100,000 steps): ``zoo publish .../last.ckpt`` would
    publish weights from before the last steps, or find no file."""
    # rank 0's files decide for every rank, since saving is collective
    missing = trainer.strategy.broadcast([path for path in final_checkpoints(trainer)
                                          if _saved_step(path) != trainer.global_step]
                                         if trainer.is_global_zero else None)
    for path in missing:
        trainer.save_checkpoint(path, weights_only=False)  # the full state: the run resumes from it


@contextlib.contextmanager
def _setup_messages_held_back() -> Iterator[None]:
    """Hold back what Lightning logs and warns while a recipe is set up, and show it once the block succeeds: when
    an input is refused, its error is the only output."""
    loggers = [logging.getLogger(name) for name in _LIGHTNING_LOGGERS]
    saved = [(log.handlers, log.propagate) for log in loggers]
    held: list[logging.LogRecord] = []
    holder = logging.Handler()
    holder.emit = held.append
    for log in loggers:
        log.handlers, log.propagate = [holder], False
    try:
        with warnings.catch_warnings(record=True) as warned:
            yield
    finally:
        for log, (handlers, propagate) in zip(loggers, saved):
            log.handlers, log.propagate = handlers, propagate
    for record in held:
        logging.getLogger(record.name).handle(record)
    for warning in warned:
        warnings.showwarning(warning.message, warning.category, warning.filename, warning.lineno)
