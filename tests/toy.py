"""A toy method for the core's tests: a registered ZooModule that trains on random regression data."""

from __future__ import annotations

import os
import signal

import lightning as L
import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

from zoo.module import ZooModule
from zoo.registry import register_method


class ToyRegressor(ZooModule):
    model_type = "toy-mlp"
    method = "toy"

    def __init__(self, width: int = 16, depth: int = 2, lr: float = 1e-2):
        super().__init__()
        self.save_hyperparameters()
        layers, d = [], 4
        for _ in range(depth):
            layers += [nn.Linear(d, width), nn.GELU()]
            d = width
        self.net = nn.Sequential(*layers, nn.Linear(d, 1))
        # a derived, unsaved buffer: exercises reset_buffers after a meta-device build
        self.register_buffer("scale", torch.full((1,), float(width) ** -0.5), persistent=False)

    def reset_buffers(self, device: torch.device) -> None:
        self.scale = torch.full((1,), float(self.hparams.width) ** -0.5, device=device)

    def forward(self, x: torch.Tensor) -> torch.Tensor:  # (B, 4) -> (B, 1)
        return self.net(x) * self.scale * self.hparams.width**0.5

    def training_step(self, batch, batch_idx):
        x, y = batch
        loss = nn.functional.mse_loss(self(x), y)
        self.log("train_loss", loss)
        return loss

    def configure_optimizers(self):
        return torch.optim.SGD(self.parameters(), lr=self.hparams.lr)


class ToyData(L.LightningDataModule):
    def __init__(self, n: int = 64, batch_size: int = 8, seed: int = 0):
        super().__init__()
        self.save_hyperparameters()

    def train_dataloader(self):
        g = torch.Generator().manual_seed(self.hparams.seed)
        x = torch.randn(self.hparams.n, 4, generator=g)
        y = x.sum(dim=1, keepdim=True)
        return DataLoader(TensorDataset(x, y), batch_size=self.hparams.batch_size)


class SigtermAtStep(L.Callback):
    """Sends this process SIGTERM (what `kill` or a job scheduler sends) once training reaches ``step``."""

    def __init__(self, step: int):
        self.step = step

    def on_train_batch_end(self, trainer, *args) -> None:
        if trainer.global_step == self.step:
            os.kill(os.getpid(), signal.SIGTERM)


def register() -> None:
    register_method("toy", modules={"toy-mlp": "toy:ToyRegressor"})


register()


def convert_upstream(files, out_dir, entry) -> None:
    """A stand-in 'official' format: raw weights in a safetensors file under other key names."""
    from safetensors.torch import load_file

    raw = load_file(str(files["official.safetensors"]))
    model = ToyRegressor(**entry.convert_args)
    model.load_weights_({k.replace("official.", "net."): v for k, v in raw.items()})
    model.save_pretrained(out_dir)
