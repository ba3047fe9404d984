"""``ChessTransformerModule``: the ChessBench transformer as a zoo LightningModule (train, evaluate, play)."""

from __future__ import annotations

import math

import chess
import torch
import torch.nn.functional as F

from zoo.chess.model import ChessTransformer, ChessTransformerConfig
from zoo.chess.tokenizer import ACTIONS, square_token_index
from zoo.module import ZooModule
from zoo.schedules import warmup_cosine

__all__ = ["ChessTransformerModule", "hl_gauss_targets", "square_factored_action_embeddings"]

ACTION_EMBEDDING_INITS = ("official", "squares", "board")


def hl_gauss_targets(win_probs: torch.Tensor, num_buckets: int, sigma_buckets: float) -> torch.Tensor:
    """HL-Gauss label smoothing (paper ablation): the mass of N(p, sigma) on each bucket [k/K, (k+1)/K],
    renormalised over [0, 1]. ``sigma_buckets`` is in bucket widths (the paper's best: 0.75)."""
    edges = torch.linspace(0, 1, num_buckets + 1, dtype=torch.float64, device=win_probs.device)  # (K+1,)
    sigma = sigma_buckets / num_buckets
    cdf = torch.special.erf((edges[None, :] - win_probs.double()[:, None]) / (math.sqrt(2) * sigma))  # (B, K+1)
    mass = cdf[:, 1:] - cdf[:, :-1]
    return (mass / mass.sum(-1, keepdim=True)).float()  # (B, K)


def square_factored_action_embeddings(dim: int, generator: torch.Generator | None = None,
                                      square_positions: torch.Tensor | None = None) -> torch.Tensor:
    """A start for the token table ``(1968, dim)``: each action's row is the sum of a from-square, a to-square
    and a promotion vector shared by every action with that square or piece, at the scale of the position
    table once multiplied by sqrt(dim). What the network first learns about a square then applies to all moves
    touching it; rows are trained freely afterwards, so the architecture and checkpoints stay the official ones.
    With ``square_positions`` ``(64, dim)`` (the position-table rows of the board tokens, a1 = 0 ... h8 = 63),
    each square's vectors also include its row: a move's token starts out resembling its squares' board tokens."""
    from_idx = torch.tensor([chess.parse_square(a[:2]) for a in ACTIONS])  # a1 = 0 ... h8 = 63
    to_idx = torch.tensor([chess.parse_square(a[2:4]) for a in ACTIONS])
    promo_idx = torch.tensor([" qrbn".index(a[4:] or " ") for a in ACTIONS])
    from_vec, to_vec = torch.randn(2, 64, dim, generator=generator)
    promo_vec = torch.randn(5, dim, generator=generator)
    terms = 3
    if square_positions is not None:
        from_vec, to_vec, terms = from_vec + square_positions, to_vec + square_positions, 5
    rows = from_vec[from_idx] + to_vec[to_idx] + promo_vec[promo_idx]  # (1968, dim), each entry of variance ~terms
    return rows / math.sqrt(terms * dim)  # x sqrt(dim) in the forward: unit scale, like the position table


class ChessTransformerModule(ZooModule):
    """Action-value, state-value or behavioural-cloning predictor from "Amortized Planning with Large-Scale
    Transformers: A Case Study on Chess". Batches are dicts with ``sequences`` ``(B, T)`` int64 (targets
    in the official layout) and ``win_probs`` ``(B,)`` (used for HL-Gauss targets; NaN for BC).

    Loss: the natural-log NLL of the last token (as the official trainer), or the cross-entropy against
    HL-Gauss smoothed bucket targets when ``hl_gauss_sigma`` is set (AV/SV only).

    ``action_embedding_init="squares"`` starts the token table from ``square_factored_action_embeddings``
    instead of the official truncated normal (std 0.02): small-data runs learn move values much sooner.
    ``"board"`` adds the position rows of the move's board squares to those vectors (validation loss 3.83 vs
    4.21 after 1,000 small-data steps).
    """

    model_type = "chess-transformer"
    method = "chess"

    def __init__(
        self,
        policy: str = "action_value",
        num_layers: int = 8,
        embedding_dim: int = 256,
        num_heads: int = 8,
        widening_factor: int = 4,
        num_return_buckets: int = 128,
        max_sequence_length: int = 79,
        learning_rate: float = 1e-4,
        hl_gauss_sigma: float | None = None,
        lr_schedule: str = "constant",
        warmup_steps: int = 0,
        action_embedding_init: str = "official",
    ):
        super().__init__()
        self.save_hyperparameters()
        self.cfg = ChessTransformerConfig(
            policy=policy,
            num_layers=num_layers,
            embedding_dim=embedding_dim,
            num_heads=num_heads,
            widening_factor=widening_factor,
            num_return_buckets=num_return_buckets,
            max_sequence_length=max_sequence_length,
        )
        if hl_gauss_sigma is not None and (policy == "behavioral_cloning" or hl_gauss_sigma <= 0):
            raise ValueError("hl_gauss_sigma must be positive and applies only to action_value / state_value")
        if lr_schedule not in ("constant", "cosine"):
            raise ValueError(f"lr_schedule must be 'constant' (official) or 'cosine' (warm-up, then decay to 0 at the "
                             f"trainer's max_steps), got {lr_schedule!r}")
        if action_embedding_init not in ACTION_EMBEDDING_INITS:
            raise ValueError(f"action_embedding_init must be one of {', '.join(ACTION_EMBEDDING_INITS)}, "
                             f"got {action_embedding_init!r}")
        self.model = ChessTransformer(self.cfg)
        if action_embedding_init != "official" and not self.model.position_embedding.is_meta:
            with torch.no_grad():
                board_inputs = 1 + square_token_index(torch.arange(64))  # +1: the BOS shift of the inputs
                positions = self.model.position_embedding[board_inputs] if action_embedding_init == "board" else None
                self.model.token_embedding.weight.copy_(square_factored_action_embeddings(embedding_dim, None, positions))

    @property
    def policy(self) -> str:
        return self.cfg.policy

    def forward(self, sequences: torch.Tensor) -> torch.Tensor:
        """Log-probs ``(B, T, out)`` for target sequences ``(B, T)``."""
        return self.model(sequences)

    # ------------------------------------------------------------------ training
    def _loss(self, batch: dict[str, torch.Tensor]) -> tuple[torch.Tensor, torch.Tensor]:
        sequences = batch["sequences"].long()
        log_probs = self.model(sequences)[:, -1]  # (B, out): only the last position is trained
        target = sequences[:, -1]
        if self.hparams.hl_gauss_sigma is None:
            loss = F.nll_loss(log_probs, target)
        else:
            soft = hl_gauss_targets(batch["win_probs"], self.cfg.output_size, self.hparams.hl_gauss_sigma)
            loss = -(soft * log_probs).sum(-1).mean()
        accuracy = (log_probs.argmax(-1) == target).float().mean()
        return loss, accuracy

    def training_step(self, batch, batch_idx):
        loss, accuracy = self._loss(batch)
        self.log_dict({"train_loss": loss, "train_accuracy": accuracy}, prog_bar=True, batch_size=len(batch["sequences"]))
        return loss

    def validation_step(self, batch, batch_idx):
        loss, accuracy = self._loss(batch)
        self.log_dict({"val_loss": loss, "val_accuracy": accuracy}, prog_bar=True, sync_dist=True, batch_size=len(batch["sequences"]))

    def configure_optimizers(self):
        # official: Adam, no weight decay, constant rate; gradient clipping (global norm 1.0) is the Trainer's
        # gradient_clip_val. Short CPU runs end better with the rate decayed to zero ("cosine").
        optimizer = torch.optim.Adam(self.parameters(), lr=self.hparams.learning_rate)
        if self.hparams.lr_schedule == "constant":
            return optimizer
        return warmup_cosine(optimizer, self.hparams.warmup_steps, int(self.trainer.estimated_stepping_batches))

    # ------------------------------------------------------------------ play
    def engine(self, **kwargs):
        """A move-choosing engine (AV/SV/BC per this model's policy); see ``zoo.chess.engine.ChessEngine``."""
        from zoo.chess.engine import ChessEngine

        return ChessEngine(self, **kwargs)

    def model_card_fields(self):
        fields = super().model_card_fields()
        fields["tags"] += ["chess", self.policy]
        fields["datasets"] = ["ChessBench"]
        return fields
