"""``ZooModule``: the LightningModule base every method's modules derive from.

A subclass sets ``model_type`` (its registry key) and ``method``, takes plain-typed ``__init__`` arguments and calls
``self.save_hyperparameters()``. Those hyperparameters are the whole architecture config: they go to ``config.json``
and rebuild the module (on the meta device) when it is loaded, so they must be plain JSON containers.
"""

from __future__ import annotations

import json
import os
import tempfile
import warnings
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

import torch
from torch.overrides import TorchFunctionMode

from zoo.io import CONFIG_NAME, DEFAULT_SHARD_BYTES, DTYPES, dtype_name, folder_undone_on_failure, load_state_dict
from zoo.io import CONFIG_FORMAT, write_repo, write_text_atomic
from zoo._lightning import L, PossibleUserWarning
from zoo.card import check_card, load_card, render_card
from zoo.convert import preview, safe_torch_load
from zoo.errors import ConfigError, InputError
from zoo.hparams import check_arguments, closest, reading_saved_config
from zoo.hub import resolve_repo, upload_folder
from zoo.registry import methods, resolve_module_class
from zoo._verify import file_pins

if TYPE_CHECKING:
    from typing_extensions import Self  # typing.Self needs Python 3.11; type checkers know typing_extensions

__all__ = ["ZooModule", "publish", "plain", "constructor_args", "CONFIG_FORMAT", "parse_dtype", "read_config"]


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
    raise TypeError(f"{where} is a {type(obj).__name__}; zoo hyperparameters must be plain JSON values (dict, list, "
                    "str, int, float, bool, None) so checkpoints load with weights_only=True")


class _SkipInit(TorchFunctionMode):
    """Make ``torch.nn.init`` calls no-ops: on the meta device they only cost time, and weights follow."""

    def __torch_function__(self, func, types, args=(), kwargs=None):
        if getattr(func, "__module__", None) == "torch.nn.init":
            return args[0] if args else kwargs.get("tensor")
        return func(*args, **(kwargs or {}))


def constructor_args(hparams: Any) -> dict[str, Any]:
    """Hyperparameters without the bookkeeping LightningCLI adds (``_class_path``, ``_instantiator``)."""
    return {k: v for k, v in dict(hparams).items() if not k.startswith("_")}


# ----------------------------------------------------------------------------- reading repos
_SHORT_DTYPE_NAMES = {"fp64": "float64", "fp32": "float32", "fp16": "float16", "bf16": "bfloat16"}


def parse_dtype(dtype: str | torch.dtype | None, *, floating: bool = True) -> torch.dtype | None:
    """The dtype a name means: torch's (``"bfloat16"``, ``"torch.bfloat16"``, ``"half"``) or short (``"bf16"``), one a
    repo can store; a floating one unless ``floating=False``."""
    if dtype is None or isinstance(dtype, torch.dtype):
        return dtype
    name = dtype_name(dtype)
    found = getattr(torch, _SHORT_DTYPE_NAMES.get(name, name), None)
    if isinstance(found, torch.dtype) and dtype_name(found) in DTYPES and (found.is_floating_point or not floating):
        return found
    names = [n for n in DTYPES if getattr(torch, n).is_floating_point or not floating]
    raise ValueError(f"unknown dtype {dtype!r}; use one of {', '.join(names)} (or {', '.join(_SHORT_DTYPE_NAMES)})")


_FIX = "Correct that file, or get a good copy of the repo (download it again, or publish it again from its source)"


def read_config(config_path: Path) -> dict:
    """A repo's ``config.json``, checked: valid JSON holding ``model_type`` and ``hparams``, in a format this zoo
    reads. Every problem is a ConfigError that names the file."""
    if not config_path.exists():
        raise FileNotFoundError(f"{config_path.parent} has no {CONFIG_NAME}; it is not a zoo repo folder")

    def bad(problem: str, fix: str = f". {_FIX}") -> ConfigError:
        return ConfigError(f"{config_path}{problem}{fix}", path=config_path)

    try:
        config = json.loads(config_path.read_bytes())
    except ValueError as err:  # JSONDecodeError, or bytes that are not UTF-8
        raise bad(f" is not valid JSON ({err})") from None
    if not isinstance(config, dict):
        raise bad(f" holds a JSON {type(config).__name__}, not an object")
    version = config.get("zoo_config_format", CONFIG_FORMAT)
    if not isinstance(version, int) or isinstance(version, bool) or version < 1:
        raise bad(f": zoo_config_format must be a positive integer, got {version!r}")
    if version > CONFIG_FORMAT:
        from zoo import __version__

        raise bad(f" was written by a newer zoo (zoo_config_format {version}, zoo {config.get('zoo_version', '?')}); "
                  f"this zoo {__version__} reads format {CONFIG_FORMAT} and older: upgrade with pip install -U "
                  "lightning-zoo", fix="")
    for key in ("model_type", "hparams"):
        if key not in config:
            raise bad(f" lacks {key!r}: it was not written by ZooModule.save_pretrained", fix="")
    if not isinstance(config["hparams"], dict):
        raise bad(f": hparams must be a JSON object, got {config['hparams']!r}")
    return config


def _module_class(config: dict, config_path: Path) -> type[ZooModule]:
    model_type = config["model_type"]
    known = sorted(t for spec in methods().values() for t in spec.modules)
    if model_type not in known:
        close = closest(str(model_type), known)
        hint = f" (did you mean {' or '.join(map(repr, close))}?)" if close else ""
        raise ConfigError(f"{config_path}: unknown model_type {model_type!r}{hint}; the installed methods register "
                          f"{', '.join(known)}. Correct the file, or install the package of the method that wrote it",
                          path=config_path)
    return resolve_module_class(model_type)


def _quiet_eval_mode_warning_by_design(module: ZooModule) -> tuple | None:
    """Leave out Lightning's warning about submodules in eval mode at the start of training when each of them is in
    ``module.parts_in_eval_mode()``. The filter names their exact number: a module in eval mode by mistake beside
    them still shows the warning. Returns the filter, for ``on_train_start`` to remove once the warning is past."""
    by_design = {id(sub) for part in module.parts_in_eval_mode() for sub in part.modules()}
    in_eval = [sub for sub in module.modules() if not sub.training]
    if not (in_eval and all(id(sub) in by_design for sub in in_eval)):
        return None
    warnings.filterwarnings("ignore", message=rf"Found {len(in_eval)} module\(s\) in eval mode at the start of "
                            "training", category=PossibleUserWarning)
    return warnings.filters[0]


class ZooModule(L.LightningModule):
    model_type: ClassVar[str] = ""
    method: ClassVar[str] = ""

    # ------------------------------------------------------------------ config
    def architecture(self) -> dict[str, Any]:
        """The resolved options that define the function beyond the weights' shapes: a fine-tune keeps them."""
        return {}

    @property
    def config(self) -> dict[str, Any]:
        """The plain-dict hyperparameters that rebuild this module."""
        return plain(constructor_args(self.hparams))

    def config_json(self) -> dict[str, Any]:
        if not self.model_type or not self.method:
            raise TypeError(f"{type(self).__name__} must set the class attributes model_type and method")
        return {"method": self.method, "model_type": self.model_type, "hparams": self.config}

    # ----------------------------------------------------------- persistence
    def pretrained_state_dict(self) -> dict[str, torch.Tensor]:
        """The tensors saved to safetensors (methods may drop derived buffers)."""
        return self.state_dict()

    def store_as_(self, dtype: torch.dtype) -> ZooModule:
        """Store the floating weights in ``dtype`` from now on (``zoo publish --dtype``): a cast, unless the saved
        tensors are not the parameters' values (a BitDelta overrides this)."""
        return self.to(dtype)

    def save_pretrained(self, directory: str | os.PathLike, *, max_shard_bytes: int = DEFAULT_SHARD_BYTES) -> list[str]:
        """``config.json`` and ``model.safetensors``, sharded above ``max_shard_bytes`` (:func:`zoo.io.write_repo`)."""
        return write_repo(directory, self.pretrained_state_dict(), self.config_json(), max_shard_bytes=max_shard_bytes)

    @classmethod
    def from_pretrained(cls, name_or_path: str | os.PathLike, *, revision: str | None = None,
                        device: str | torch.device | None = None, dtype: str | torch.dtype | None = None,
                        **kwargs) -> Self:
        """``zoo.load``: the module a repo's ``config.json`` names, in eval mode, checked to be a ``cls`` (so
        ``EScAIPModule.from_pretrained(name)`` is typed as one). ``name_or_path``: a catalog name,
        ``hf://owner/repo[@revision]``, a local repo folder or a Lightning ``.ckpt`` (:meth:`from_checkpoint`). Extra
        keyword arguments go to the method's ``from_repo_dir`` (e.g. ``merged=False`` for BitDelta deltas)."""
        if os.fspath(name_or_path).endswith(".ckpt"):
            if revision is not None or kwargs:
                raise InputError(f"{name_or_path} is a Lightning checkpoint: a revision and load options apply to "
                                 "repos only; drop them, or publish the checkpoint as a repo and load that")
            model = cls.from_checkpoint(Path(name_or_path).expanduser())
            model.to(device=device or "cpu", dtype=parse_dtype(dtype))
            model.zoo_source = str(name_or_path)
            return model
        directory = resolve_repo(name_or_path, revision=revision)
        config_path = directory / CONFIG_NAME
        config = read_config(config_path)
        module_class = _module_class(config, config_path)
        if not issubclass(module_class, cls):
            raise TypeError(f"{name_or_path} holds a {module_class.__name__}, not a {cls.__name__}")
        try:
            with reading_saved_config():
                check_arguments(module_class, config["hparams"], "hparams", module_class.__name__)
                model = module_class.from_repo_dir(directory, config["hparams"], device=torch.device(device or "cpu"),
                                                   dtype=parse_dtype(dtype), **kwargs)
        except ConfigError as err:
            if err.path is not None:  # another repo's config (a delta's base, say) names its own file
                raise
            raise ConfigError(f"{config_path}: {err}. {_FIX}", path=config_path) from None
        model.zoo_source = str(name_or_path)
        return model.eval()

    @classmethod
    def from_checkpoint(cls, path: str | os.PathLike) -> Self:
        """Rebuild from a Lightning ``.ckpt`` without unpickling code (``weights_only=True``), in eval mode, holding
        what ``save_pretrained`` would write after ``fit``: a class that keeps more than its state dict in a checkpoint
        defines ``weights_from_checkpoint_(checkpoint)``, called after the state dict is assigned."""
        ckpt = safe_torch_load(path, what="a Lightning checkpoint")
        model_type = ckpt.get("zoo_model_type")
        if model_type is None:
            raise ValueError(f"{path} was not written by a ZooModule (no 'zoo_model_type' in the checkpoint)")
        try:
            module_class = resolve_module_class(model_type)
        except KeyError as err:  # a checkpoint of a method this installation lacks
            raise ConfigError(f"{path}: {err.args[0]}; install the package of the method that wrote it",
                              path=Path(path)) from None
        if not issubclass(module_class, cls):
            raise TypeError(f"{path} holds a {module_class.__name__}, not a {cls.__name__}")
        model = module_class.from_state_dict(constructor_args(ckpt.get("hyper_parameters", {})), ckpt["state_dict"])
        if (finish := getattr(model, "weights_from_checkpoint_", None)) is not None:
            finish(ckpt)
        return model

    @classmethod
    def from_repo_dir(cls, directory: Path, hparams: dict[str, Any], *, device: torch.device, dtype: torch.dtype | None,
                      **kwargs) -> "ZooModule":
        """Build from a verified repo folder (:meth:`from_state_dict` of its weights, memory-mapped on ``device``);
        methods whose repos need more (a base model, say) override this."""
        if kwargs:
            raise TypeError(f"{cls.__name__} takes no load options, got {sorted(kwargs)}")
        return cls.from_state_dict(hparams, load_state_dict(directory, device=str(device)), dtype=dtype)

    @classmethod
    def from_state_dict(cls, hparams: Mapping[str, Any], state: Mapping[str, torch.Tensor], *,
                        dtype: torch.dtype | None = None) -> Self:
        """``cls(**hparams)`` holding ``state``, in eval mode: built on the meta device (no random init, no second
        copy of the weights), then ``state`` assigned strictly."""
        model = cls.build_on_meta(hparams)
        model.load_weights_(state)
        if dtype is not None:
            model.to(dtype=dtype)
        return model.eval()

    @classmethod
    def build_on_meta(cls, hparams: Mapping[str, Any]) -> Self:
        """``cls(**hparams)`` on the meta device with ``torch.nn.init`` skipped: every shape, no storage."""
        with torch.device("meta"), _SkipInit():
            try:
                return cls(**hparams)
            except ConfigError:
                raise
            except ValueError as err:  # a constructor's own check (a bad combination): the config's fault too
                raise ConfigError(f"{cls.__name__} rejects these hyperparameters: {err}") from None

    def load_weights_(self, state: Mapping[str, torch.Tensor]) -> None:
        """Assign ``state`` strictly (missing or unexpected keys are an error), then restore derived buffers."""
        try:
            result = self.load_state_dict(state, strict=False, assign=True)
        except RuntimeError as err:  # shape mismatches
            raise RuntimeError(f"weights do not match {type(self).__name__}: {err}") from None
        if result.missing_keys or result.unexpected_keys:
            raise RuntimeError(f"weights do not match {type(self).__name__}: missing {preview(result.missing_keys)}, "
                               f"unexpected {preview(result.unexpected_keys)}")
        if any(t.is_meta for t in self.buffers()):
            self.reset_nonpersistent_buffers(next(iter(state.values())).device if state else torch.device("cpu"))
            if still := [n for n, t in self.named_buffers() if t.is_meta]:
                raise RuntimeError(f"{type(self).__name__}: buffers {still} were not restored after loading")

    def reset_nonpersistent_buffers(self, device: torch.device) -> None:
        """Recompute buffers that are not saved (``persistent=False``) after a meta-device build: by default
        ``reset_buffers(device)`` of every submodule that defines it."""
        for module in self.modules():
            fn = getattr(module, "reset_buffers", None)
            if fn is not None and any(b.is_meta for b in module.buffers(recurse=False)):
                fn(device)

    # ----------------------------------------------------------------- training
    def parts_in_eval_mode(self) -> list[torch.nn.Module]:
        """Submodules that stay in eval mode while the rest trains, by design (frozen parts, say): ``train()``
        leaves them in eval mode, and Lightning's warning about modules in eval mode at the start of training is
        not shown for them."""
        return []

    def train(self, mode: bool = True) -> Self:
        super().train(mode)
        for part in self.parts_in_eval_mode():
            part.eval()
        return self

    def on_fit_start(self) -> None:
        # zoo.load returns eval mode and Lightning keeps a module's mode, so switch back for training
        self.train()
        self._eval_mode_filter = _quiet_eval_mode_warning_by_design(self)

    def on_train_start(self) -> None:
        # Lightning warns just before this hook: the filter goes, so it does not outlive this fit
        if (rule := getattr(self, "_eval_mode_filter", None)) in warnings.filters:
            warnings.filters.remove(rule)

    def on_save_checkpoint(self, checkpoint: dict[str, Any]) -> None:
        from zoo.lightning_compat import resume_where_fit_stopped

        # lets `zoo publish run.ckpt` rebuild the right class without unpickling anything
        checkpoint["zoo_model_type"] = self.model_type
        resume_where_fit_stopped(checkpoint)

    # ------------------------------------------------------------ publishing
    def publish(self, repo: str | os.PathLike, *, card: dict[str, Any] | str | os.PathLike | None = None,
                max_shard_bytes: int = DEFAULT_SHARD_BYTES, endpoint: str | None = None, token: str | None = None,
                private: bool = False, commit_message: str | None = None) -> dict[str, Any]:
        """Write this module as a repo into the folder ``repo``, or upload it to the Hub (``hf://owner/name``).

        ``card``: model card fields (:mod:`zoo.card`), a dict or a YAML/JSON file, checked before anything is written.
        Returns ``{"repo", "commit", "files": {name: {"sha256", "size"}}}``, ``commit`` None for a folder."""
        if card is not None:
            card = check_card(card) if isinstance(card, dict) else load_card(card)
        if not str(repo).startswith("hf://"):
            files = self._write_repo(Path(repo), card, max_shard_bytes)
            return {"repo": str(Path(repo)), "commit": None, "files": files}
        repo_id = str(repo)[len("hf://"):]
        with tempfile.TemporaryDirectory(prefix="zoo-publish-") as tmp:
            files = self._write_repo(Path(tmp), card, max_shard_bytes)
            commit = upload_folder(Path(tmp), repo_id, message=commit_message or f"Upload {self.model_type} with zoo",
                                   endpoint=endpoint, token=token, private=private)
        return {"repo": repo_id, "commit": commit, "files": files}

    def _write_repo(self, folder: Path, card: dict | None, max_shard_bytes: int) -> dict[str, dict]:
        with folder_undone_on_failure(folder):  # a new repo folder is whole, card included, or gone
            names = self.save_pretrained(folder, max_shard_bytes=max_shard_bytes)
            files = file_pins(folder, names)
            # the card shows what was written, not the in-memory module (a delta loads merged, stores bf16 tensors)
            written = json.loads((folder / CONFIG_NAME).read_text(encoding="utf-8"))["hparams"]
            write_text_atomic(folder / "README.md", render_card(self, files, card, config=written))
        return {**files, **file_pins(folder, ["README.md"])}

    def model_card_fields(self) -> dict[str, Any]:
        """Defaults for the model card; methods add tags, datasets, metrics."""
        return {"tags": [self.method, self.model_type]}


def publish(model: ZooModule | str | os.PathLike, repo: str | os.PathLike, **kwargs) -> dict[str, Any]:
    """``zoo.publish``: ``model.publish(repo, **kwargs)`` (see :meth:`ZooModule.publish`); ``model`` may also be
    anything :meth:`ZooModule.from_pretrained` loads, a Lightning checkpoint included (published with the weights
    ``save_pretrained`` would write after ``fit``)."""
    if not isinstance(model, ZooModule):
        model = ZooModule.from_pretrained(model)
    return model.publish(repo, **kwargs)
