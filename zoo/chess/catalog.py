"""Catalog: the official searchless_chess checkpoints, converted from the upstream zips on first load."""

from zoo.registry import FileSpec, ModelEntry

_BASE = "https://storage.googleapis.com/searchless_chess/checkpoints"
_PAPER = "https://arxiv.org/abs/2402.04494"
_LICENSE = "CC-BY-4.0"  # the released weights; the official code is Apache-2.0


def _entry(name: str, zip_name: str, arch: dict, description: str, metrics: dict | None = None, recipe=None) -> ModelEntry:
    return ModelEntry(
        name=name,
        method="chess",
        source="upstream",
        repo=f"google-deepmind/searchless_chess/{zip_name}",
        files=(FileSpec(path=f"{zip_name}.zip", sha256=None, size=None, url=f"{_BASE}/{zip_name}.zip"),),
        architecture={"model_type": "chess-transformer", "num_heads": 8, "widening_factor": 4, "step": 6_400_000, **arch},
        converter="zoo.chess.convert:from_upstream",
        license=_LICENSE,
        paper=_PAPER,
        description=description,
        metrics=metrics or {},
        recipe=recipe,
        defaults={"temperature": None},
    )


ENTRIES = [
    _entry(
        "chess-9m",
        "9M",
        {"policy": "action_value", "num_layers": 8, "embedding_dim": 256, "num_params": 8_954_240},
        "Official 9M action-value transformer (8 layers, width 256) trained on ChessBench; greedy move choice over all legal moves.",
        recipe="recipes/chess/av_9m.yaml",
    ),
    _entry(
        "chess-136m",
        "136M",
        {"policy": "action_value", "num_layers": 8, "embedding_dim": 1024, "num_params": 136_479_872},
        "Official 136M action-value transformer (8 layers, width 1024) trained on ChessBench.",
        recipe="recipes/chess/av_136m.yaml",
    ),
    _entry(
        "chess-270m",
        "270M",
        {"policy": "action_value", "num_layers": 16, "embedding_dim": 1024, "num_params": 270_730_368},
        "Official 270M action-value transformer (16 layers, width 1024): grandmaster-level play without search.",
        metrics={"lichess_blitz_elo_vs_humans": 2895, "puzzle_accuracy": 0.954},
        recipe="recipes/chess/av_270m.yaml",
    ),
    _entry(
        "chess-9m-sv",
        "9M_state_value",
        {"policy": "state_value", "num_layers": 8, "embedding_dim": 256, "num_params": 8_954_240},
        "Official 9M state-value transformer; moves are chosen by the value of each successor position.",
        recipe="recipes/chess/sv_9m.yaml",
    ),
    _entry(
        "chess-9m-bc",
        "9M_behavioral_cloning",
        {"policy": "behavioral_cloning", "num_layers": 8, "embedding_dim": 256, "num_params": 9_427_120},
        "Official 9M behavioural-cloning transformer predicting Stockfish's best move directly.",
        recipe="recipes/chess/bc_9m.yaml",
    ),
]
