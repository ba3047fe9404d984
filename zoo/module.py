"""``ZooModule``: the LightningModule base every method's modules derive from.

A subclass sets ``model_type`` (its registry key) and ``method``, takes plain-typed ``__init__`` arguments
and calls ``self.save_hyperparameters()``. Those hyperparameters are the whole architecture config: they go
to ``config.json`` and rebuild the module (on the meta device) when it is loaded, so they must be plain
JSON containers, never DictConfig or tensors.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any, ClassVar

import torch
from torch.overrides import TorchFunctionMode

from zoo._io import CONFIG_NAME, DEFAULT_SHARD_BYTES, atomic_path, save_state_dict, write_json_atomic
from zoo._lightning import L  # Lightning without the optional packages torchmetrics would import
from zoo.errors import ConfigError

__all__ = ["ZooModule", "plain", "constructor_args", "CONFIG_FORMAT"]

CONFIG_FORMAT = 1


def plain(obj: Any, where: str = "hparams") -> Any:
    """Deep-convert to JSON-able plain containers, or fail naming the offending key."""
    if obj is None or isinstance(obj, (bool, int, float, str)):
        return obj
    if isinstance(obj, (list, tuple)):
        return [plain(v, f"{where}[{i}]") for i, v in enumerate(obj)]
    if isinstance(obj, dict) or hasattr(obj, "items"):
        return {str(k): plain(v, f"{where}.{k}") for k, v in obj.items()}
    if hasattr(obj, "__dataclass_fields__"):
        from dataclasses import asdict

        return plain(asdict(obj), where)
    raise TypeError(
        f"{where} is a {type(obj).__name__}; zoo hyperparameters must be plain JSON values "
        "(dict, list, str, int, float, bool, None) so checkpoints load with weights_only=True"
    )


class _SkipInit(TorchFunctionMode):
    """Make ``torch.nn.init`` calls no-ops: on the meta device they only cost time, and weights follow."""

    def __torch_function__(self, func, types, args=(), kwargs=None):
        if getattr(func, "__module__", None) == "torch.nn.init":
            return args[0] if args else kwargs.get("tensor")
        return func(*args, **(kwargs or {}))


def constructor_args(hparams: Any) -> dict[str, Any]:
    """Hyperparameters without the bookkeeping LightningCLI adds (``_class_path``, ``_instantiator``)."""
    return {k: v for k, v in dict(hparams).items() if not k.startswith("_")}


class ZooModule(L.LightningModule):
    model_type: ClassVar[str] = ""
    method: ClassVar[str] = ""

    # ------------------------------------------------------------------ config
    @property
    def config(self) -> dict[str, Any]:
        """The plain-dict hyperparameters that rebuild this module."""
        return plain(constructor_args(self.hparams))

    def config_json(self) -> dict[str, Any]:
        if not self.model_type or not self.method:
            raise TypeError(f"{type(self).__name__} must set the class attributes model_type and method")
        from zoo import __version__

        return {
            "zoo_config_format": CONFIG_FORMAT,
            "zoo_version": __version__,
            "method": self.method,
            "model_type": self.model_type,
            "hparams": self.config,
        }

    # ----------------------------------------------------------- persistence
    def pretrained_state_dict(self) -> dict[str, torch.Tensor]:
        """The tensors saved to safetensors; methods may drop derived buffers here."""
        return self.state_dict()

    def save_pretrained(
        self,
        directory: str | os.PathLike,
        *,
        max_shard_bytes: int = DEFAULT_SHARD_BYTES,
        extra_files: dict[str, str | bytes] | None = None,
    ) -> list[str]:
        """Write ``config.json`` and ``model.safetensors`` (sharded above ``max_shard_bytes``)."""
        directory = Path(directory)
        names = save_state_dict(
            self.pretrained_state_dict(),
            directory,
            max_shard_bytes=max_shard_bytes,
        )
        write_json_atomic(directory / CONFIG_NAME, self.config_json())
        for name, content in (extra_files or {}).items():
            with atomic_path(directory / name) as tmp:
                tmp.write_bytes(content.encode() if isinstance(content, str) else content)
            names.append(name)
        return [CONFIG_NAME, *names]

    @classmethod
    def from_pretrained(cls, name_or_path: str | os.PathLike, **kwargs) -> "ZooModule":
        """``zoo.load`` that also checks the loaded module is of this class."""
        from zoo.loading import load

        model = load(name_or_path, **kwargs)
        if not isinstance(model, cls):
            raise TypeError(f"{name_or_path} holds a {type(model).__name__}, not a {cls.__name__}")
        return model

    @classmethod
    def from_repo_dir(
        cls, directory: Path, hparams: dict[str, Any], *, device: torch.device, dtype: torch.dtype | None, **kwargs
    ) -> "ZooModule":
        """Build from a verified repo folder: construct on the meta device, then assign the weights.

        No random init runs and no second copy of the weights exists. Methods whose repos need more (a base
        model, say) override this.
        """
        if kwargs:
            raise TypeError(f"{cls.__name__} takes no load options, got {sorted(kwargs)}")
        from zoo._io import load_state_dict

        with torch.device("meta"), _SkipInit():
            try:
                model = cls(**hparams)
            except ConfigError:
                raise
            except ValueError as err:  # a constructor's own check (a bad combination): the config's fault too
                raise ConfigError(f"{cls.__name__} rejects these hyperparameters: {err}") from None
        state = load_state_dict(directory, device=str(device))
        model.load_weights_(state)
        if dtype is not None:
            model.to(dtype=dtype)
        return model

    def load_weights_(self, state: dict[str, torch.Tensor]) -> None:
        """Strictly assign ``state`` (missing or unexpected keys are an error), then restore derived buffers."""
        try:
            result = self.load_state_dict(state, strict=False, assign=True)
        except RuntimeError as err:  # shape mismatches
            raise RuntimeError(f"weights do not match {type(self).__name__}: {err}") from None
        if result.missing_keys or result.unexpected_keys:
            raise RuntimeError(
                f"weights do not match {type(self).__name__}: "
                f"missing {result.missing_keys[:10]}{' …' if len(result.missing_keys) > 10 else ''}, "
                f"unexpected {result.unexpected_keys[:10]}{' …' if len(result.unexpected_keys) > 10 else ''}"
            )
        device = next(iter(state.values())).device if state else torch.device("cpu")
        leftover = [n for n, t in self.named_buffers() if t.is_meta]
        if leftover:
            self.reset_nonpersistent_buffers(device)
            still = [n for n, t in self.named_buffers() if t.is_meta]
            if still:
                raise RuntimeError(f"{type(self).__name__}: buffers {still} were not restored after loading")

    def reset_nonpersistent_buffers(self, device: torch.device) -> None:
        """Recompute buffers that are not saved (``persistent=False``) after a meta-device build.

        The default calls ``reset_buffers(device)`` on every submodule that defines it.
        """
        for module in self.modules():
            fn = getattr(module, "reset_buffers", None)
            if fn is not None and any(b.is_meta for b in module.buffers(recurse=False)):
                fn(device)

    def on_fit_start(self) -> None:
        # zoo.load returns eval mode and Lightning keeps a module's mode, so switch back for training;
        # methods with frozen parts keep them in eval by overriding train()
        self.train()

    def on_save_checkpoint(self, checkpoint: dict[str, Any]) -> None:
        # lets `zoo publish run.ckpt` rebuild the right class without unpickling anything
        checkpoint["zoo_model_type"] = self.model_type

    # ------------------------------------------------------------ publishing
    def publish(self, repo: str | os.PathLike, **kwargs) -> dict[str, Any]:
        from zoo.publishing import publish

        return publish(self, repo, **kwargs)

    def model_card_fields(self) -> dict[str, Any]:
        """Defaults for the model card; methods add tags, datasets, metrics."""
        return {"tags": [self.method, self.model_type]}
