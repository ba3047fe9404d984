"""ChessBench chess transformer ("Amortized Planning with Large-Scale Transformers: A Case Study on Chess").

Action-value, state-value and behavioural-cloning transformers that play chess without search, the official
searchless_chess checkpoints (converted on first load), ChessBench ``.bag`` data, Stockfish data generation,
evaluation, a UCI engine and terminal play. Heavy parts import on first use.
"""

from zoo.registry import register_method

register_method(
    "chess",
    modules={"chess-transformer": "zoo.chess.module:ChessTransformerModule"},
    catalog="zoo.chess.catalog",
    cli="zoo.chess.cli:register_cli",
    paper="https://arxiv.org/abs/2402.04494",
)
