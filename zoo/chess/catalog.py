"""Catalog: the official searchless_chess checkpoints (converted from the upstream zips on first load) and the
small models trained in the zoo on a mini-ChessBench (embedded in ``hub/``)."""

from zoo.registry import FileSpec, ModelEntry, read_pins

_BASE = "https://storage.googleapis.com/searchless_chess/checkpoints"
_PAPER = "https://arxiv.org/abs/2402.04494"
PINS = read_pins(__package__)  # pins.json: the zoo repos' files (written by `zoo release`)
# release zips' bytes, as measured on same-shaped files in the official layout (benchmarks/bench_real_size.py)
_ZIP_BYTES = {"9M": 33_700_000, "136M": 506_000_000, "270M": 1_010_000_000}


def _model(name: str, pins: dict, architecture: dict, description: str, **fields) -> ModelEntry:
    return ModelEntry(name=name, method="chess", **pins, architecture={"model_type": "chess-transformer", **architecture},
                      paper=_PAPER, description=description, defaults={"temperature": None}, **fields)


def _official(name: str, zip_name: str, policy: str, num_layers: int, embedding_dim: int, num_params: int,
              description: str, recipe: str, metrics: dict | None = None) -> ModelEntry:
    # head count and policy are not in the weights' shapes: the converter takes them from here
    convert_args = {"num_heads": 8, "step": 6_400_000, "policy": policy, "num_params": num_params}
    architecture = {"num_heads": 8, "widening_factor": 4, "policy": policy, "num_layers": num_layers,
                    "embedding_dim": embedding_dim, "num_params": num_params}
    return _model(name, PINS.get(name, {}), architecture, description,
                  upstream=(FileSpec(path=f"{zip_name}.zip", sha256=None, size=None, url=f"{_BASE}/{zip_name}.zip"),),
                  converter="zoo.chess.convert:from_upstream", convert_args=convert_args,
                  license="CC-BY-4.0",  # the released weights; the official code is Apache-2.0
                  metrics=metrics or {}, recipe=recipe, download_size=_ZIP_BYTES.get(zip_name))


def _embedded(name: str, policy: str, num_params: int, description: str, metrics: dict) -> ModelEntry:
    """A small model trained in the zoo (recipes/chess/build_small.sh): 4 layers, width 64, as chess-small-av."""
    architecture = {"policy": policy, "num_layers": 4, "embedding_dim": 64, "num_heads": 4, "widening_factor": 4,
                    "num_params": num_params}
    return _model(name, PINS[name], architecture, description, license="apache-2.0", metrics=metrics,
                  recipe="recipes/chess/build_small.sh")


ENTRIES = [
    _official("chess-9m", "9M", "action_value", 8, 256, 8_954_240,
              "Official 9M action-value transformer (8 layers, width 256) trained on ChessBench; greedy move choice over "
              "all legal moves.", "recipes/chess/av_9m.yaml"),
    _official("chess-136m", "136M", "action_value", 8, 1024, 136_479_872,
              "Official 136M action-value transformer (8 layers, width 1024) trained on ChessBench.",
              "recipes/chess/av_136m.yaml"),
    _official("chess-270m", "270M", "action_value", 16, 1024, 270_730_368,
              "Official 270M action-value transformer (16 layers, width 1024): grandmaster-level play without search.",
              "recipes/chess/av_270m.yaml", metrics={"lichess_blitz_elo_vs_humans": 2895, "puzzle_accuracy": 0.954}),
    _official("chess-9m-sv", "9M_state_value", "state_value", 8, 256, 8_954_240,
              "Official 9M state-value transformer; moves are chosen by the value of each successor position.",
              "recipes/chess/sv_9m.yaml"),
    _official("chess-9m-bc", "9M_behavioral_cloning", "behavioral_cloning", 8, 256, 9_427_120,
              "Official 9M behavioural-cloning transformer predicting Stockfish's best move directly.",
              "recipes/chess/bc_9m.yaml"),
    _embedded("chess-small-av", "action_value", 402_624,
        "Action-value transformer (4 layers, width 64) trained in the zoo for 95 min on 2 CPU cores on a "
        "110k-position mini-ChessBench; beats the random mover and the material-greedy player, not Stockfish",
        {"score_vs_random": 0.99, "score_vs_greedy": 0.93, "score_vs_sf0": 0.04, "action_accuracy": 0.2777,
         "kendall_tau_values": 0.2371, "mate_in_2_accuracy": 0.006}),
    _embedded("chess-small-bc", "behavioral_cloning", 522_224,
        "Behavioural-cloning sibling of chess-small-av (same data and architecture, predicts Stockfish's best move), "
        "trained in the zoo on one CPU core; weak: see its card",
        {"score_vs_random": 0.53, "score_vs_greedy": 0.03, "score_vs_sf0": 0.01, "action_accuracy": 0.1584,
         "kendall_tau_values": 0.1278, "mate_in_2_accuracy": 0.0}),
    _embedded("chess-small-sv", "state_value", 402_624,
        "State-value sibling of chess-small-av (same data and architecture, values each successor position), "
        "trained in the zoo on one CPU core; below chess-small-av against the greedy player and Stockfish: see its card",
        {"score_vs_random": 0.99, "score_vs_greedy": 0.44, "score_vs_sf0": 0.015, "action_accuracy": 0.2488,
         "kendall_tau_values": 0.101, "mate_in_2_accuracy": 0.006}),
]
