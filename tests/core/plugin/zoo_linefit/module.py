"""The module: a linear map trained with mean squared error."""

import torch
from torch import nn

from zoo.module import ZooModule


class LineFit(ZooModule):
    """y = x·w + b, fitted by SGD on the mean squared error."""

    model_type = "linefit-linear"
    method = "linefit"

    def __init__(self, features: int = 4, lr: float = 0.1):
        super().__init__()
        self.save_hyperparameters()
        self.net = nn.Linear(features, 1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:  # (B, features) -> (B, 1)
        return self.net(x)

    def training_step(self, batch, batch_idx):
        loss = nn.functional.mse_loss(self(batch[0]), batch[1])
        self.log("train_loss", loss)
        return loss

    def configure_optimizers(self):
        return torch.optim.SGD(self.parameters(), lr=self.hparams.lr)
