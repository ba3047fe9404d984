"""Points on a seeded random hyperplane."""

import lightning as L
import torch
from torch.utils.data import DataLoader, TensorDataset


class LineData(L.LightningDataModule):
    def __init__(self, features: int = 4, n: int = 64, batch_size: int = 16, seed: int = 0):
        super().__init__()
        self.save_hyperparameters()

    def train_dataloader(self):
        g = torch.Generator().manual_seed(self.hparams.seed)
        x = torch.randn(self.hparams.n, self.hparams.features, generator=g)
        y = x @ torch.randn(self.hparams.features, 1, generator=g) + 0.5
        return DataLoader(TensorDataset(x, y), batch_size=self.hparams.batch_size, shuffle=True, generator=g)
