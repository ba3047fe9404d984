"""``ChessTransformerModule``: the ChessBench transformer as a zoo LightningModule (train, evaluate, play)."""

from __future__ import annotations

import math

import chess
import torch
import torch.nn.functional as F

from zoo.chess.model import ChessTransformer, ChessTransformerConfig
from zoo.chess.tokenizer import ACTIONS, VOCAB, square_token_index
from zoo.module import ZooModule
from zoo.schedules import warmup_cosine

__all__ = ["ChessTransformerModule", "hl_gauss_targets", "square_factored_action_embeddings", "init_move_square_lookup"]

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
    """A start for the token table ``(1968, dim)``: each action's row sums a from-square, a to-square and a promotion
    vector, so what the network first learns about a square applies to all moves touching it. With
    ``square_positions`` ``(64, dim)`` (the board tokens' position rows, a1 = 0 ... h8 = 63) a move's token also
    starts out resembling its squares' board tokens."""
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


BOARD_CHARACTERS = "pnbrqkPNBRQK."  # the FEN characters a board square's token can hold
# init_move_square_lookup's channels, counted from the end of the residual stream: (first, width)
MOVE_LOOKUP_CHANNELS = {"moving": (42, 8), "captured": (34, 8), "piece": (26, 8), "board": (18, 6), "from": (12, 6), "to": (6, 6)}
MOVE_LOOKUP_RESERVED = max(first for first, _ in MOVE_LOOKUP_CHANNELS.values())  # the last 42 channels


def move_lookup_channels(dim: int) -> dict[str, slice]:
    """The slices of a ``dim``-wide residual stream that ``init_move_square_lookup`` sets up."""
    return {name: slice(dim - first, dim - first + width) for name, (first, width) in MOVE_LOOKUP_CHANNELS.items()}


def _signs(bits: list[int]) -> torch.Tensor:
    return torch.tensor([1.0 if bit else -1.0 for bit in bits])


def _square_code(square: int) -> torch.Tensor:
    """(6,) +-1: the bits of the square's rank, then of its file. Two codes' dot product is 6 for the same square
    and drops by 2 per differing bit."""
    return _signs([(v >> bit) & 1 for v in (square // 8, square % 8) for bit in range(3)])


@torch.no_grad()
def init_move_square_lookup(model: ChessTransformer, sharpness: float = 8.0) -> None:
    """Start an action-value network with the move token reading the pieces on its from- and to-square: trained from
    the usual start on little data, it never learns to look at its to-square and values a queen capture like a pawn's.

    The last 42 residual channels start out as a look-up table (every weight still trains freely):
      * the 64 board tokens' position rows carry their square's code (``_square_code``, 6 channels);
      * each move row carries its from- and to-square codes (6 + 6), except the 31 rows shared with FEN characters;
      * the 13 board characters carry a +-1 piece code (8 channels) that nothing else writes to;
      * in the first layer, head 0 (1) queries with the from- (to-) code against the board codes and copies the piece
        code it finds into 8 channels of its own."""
    D, H = model.cfg.embedding_dim, model.cfg.num_heads
    head_dim = D // H
    if model.cfg.policy != "action_value" or D < 64 or H < 2 or head_dim < 8:
        raise ValueError("the move-square look-up is for action-value networks with embedding_dim >= 64 and at least "
                         f"2 heads of >= 8 channels; got {model.cfg.policy}, {H} heads x {head_dim}")
    moving, captured, piece, board, from_code, to_code = move_lookup_channels(D).values()
    positions, table = model.position_embedding, model.token_embedding.weight
    positions[:, D - MOVE_LOOKUP_RESERVED:] = 0
    table[:, D - MOVE_LOOKUP_RESERVED:] = 0
    positions[1 + square_token_index(torch.arange(64)), board] = torch.stack([_square_code(s) for s in range(64)])  # +1: BOS
    moves = slice(len(VOCAB), None)  # table rows x sqrt(D) in the forward: codes of unit size
    table[moves, from_code] = torch.stack([_square_code(chess.parse_square(a[:2])) for a in ACTIONS[moves]]) / math.sqrt(D)
    table[moves, to_code] = torch.stack([_square_code(chess.parse_square(a[2:4])) for a in ACTIONS[moves]]) / math.sqrt(D)
    piece_bits = torch.randint(0, 2, (13, 8), generator=torch.Generator().manual_seed(0)).tolist()
    for character, bits in zip(BOARD_CHARACTERS, piece_bits):
        table[VOCAB.index(character), piece] = _signs(bits) * 3 / math.sqrt(D)  # stands out of the unit-size rest
    attention = model.blocks[0].attn
    for head, query, destination in ((0, from_code, moving), (1, to_code, captured)):
        rows = slice(head * head_dim, (head + 1) * head_dim)
        for weight in (attention.q.weight, attention.k.weight, attention.v.weight):
            weight[rows] = 0
        attention.o.weight[:, rows] = 0
        first = head * head_dim
        attention.q.weight[first:first + 6, query] = sharpness * torch.eye(6)
        attention.k.weight[first:first + 6, board] = torch.eye(6)
        attention.v.weight[first:first + 8, piece] = torch.eye(8)
        attention.o.weight[destination, first:first + 8] = torch.eye(8)


class ChessTransformerModule(ZooModule):
    """Action-value, state-value or behavioural-cloning predictor. Batches are dicts with ``sequences`` ``(B, T)``
    int64 (targets in the official layout) and ``win_probs`` ``(B,)`` (for HL-Gauss targets; NaN for BC).

    Loss: the last token's NLL (as the official trainer), or the cross-entropy against HL-Gauss bucket targets when
    ``hl_gauss_sigma`` is set. Small-data starts, not in the official trainer (see recipes/chess/small_cpu.yaml):
    ``action_embedding_init`` "squares" or "board" (``square_factored_action_embeddings``) and ``move_square_lookup``
    (``init_move_square_lookup``)."""

    model_type = "chess-transformer"
    method = "chess"

    def __init__(self, policy: str = "action_value", num_layers: int = 8, embedding_dim: int = 256, num_heads: int = 8,
                 widening_factor: int = 4, num_return_buckets: int = 128, max_sequence_length: int = 79,
                 learning_rate: float = 1e-4, hl_gauss_sigma: float | None = None, lr_schedule: str = "constant",
                 warmup_steps: int = 0, action_embedding_init: str = "official", move_square_lookup: bool = False):
        super().__init__()
        self.save_hyperparameters()
        self.cfg = ChessTransformerConfig(policy, num_layers, embedding_dim, num_heads, widening_factor,
                                          num_return_buckets, max_sequence_length=max_sequence_length)
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
        if move_square_lookup and not self.model.position_embedding.is_meta:
            init_move_square_lookup(self.model)

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
