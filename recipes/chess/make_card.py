"""Write the model-card YAML of a chess model trained here from its measurements (issue 9).

    python recipes/chess/make_card.py RUN DATA NAME --train-minutes M > RUN/card.yaml

reads RUN/eval/{static,puzzles,random,greedy,sf0,sf3}.json (written by build_small.sh), DATA/info.json
(written by ``zoo chess make-data``) and RUN/lightning_logs/*/config.yaml (the resolved recipe), and prints the
card for ``zoo publish RUN/repo hub/NAME --card RUN/card.yaml``. Every number in the card comes from those files.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import yaml

OPPONENTS = {
    "random": "random mover",
    "greedy": "1-ply material-greedy player",
    "sf0": "Stockfish 15.1, Skill Level 0, 1000 nodes",
    "sf3": "Stockfish 15.1, Skill Level 3, 1000 nodes",
}
POLICY_WORDS = {
    "action_value": "action-value (predicts the win probability of every legal move; plays the best)",
    "state_value": "state-value (predicts the win probability of each successor position; plays the best)",
    "behavioral_cloning": "behavioural-cloning (predicts Stockfish's best move directly)",
}


def _elo(result: dict) -> str:
    if result["elo"] is None:
        return "unbounded (no points lost)" if result["score"] == 1 else "unbounded (no points won)"
    return f"{result['elo']:+.0f} ± {result['elo_error_95']:.0f}"


def _against_the_aims(matches: dict, puzzles: dict) -> str:
    """The zoo's aims for these models (issue 9), checked against the measurements, in one sentence each."""
    lines = []
    for key, aim in (("random", "beat the random mover"), ("greedy", "beat the material-greedy player"),
                     ("sf0", "beat Stockfish Skill Level 0")):
        if key in matches:
            r = matches[key]
            # met only when the 95% interval of the Elo difference lies above zero, not by a lucky 0.51
            met = r["score"] == 1 or (r["elo"] is not None and r["elo"] - r["elo_error_95"] > 0)
            lines.append(f"{'Meets' if met else 'Misses'} the aim to {aim} (score {r['score']:.3f}, "
                         f"Elo difference {_elo(r)}).")
    mate2 = puzzles["mate_in_2"]["accuracy"]
    lines.append(f"{'Meets' if mate2 >= 0.5 else 'Misses'} the aim to solve half the mate-in-2 problems ({mate2:.1%}).")
    return " ".join(lines)


def _match_rule(matches: dict) -> str:
    """How the matches' games ended: every game played out, or the official tournament's adjudication."""
    rules = {(r.get("adjudication_time"), r.get("max_plies", 400)) for r in matches.values()}
    if len(rules) > 1:
        raise SystemExit(f"the matches were played under different rules {sorted(rules, key=str)}: rerun them alike")
    seconds, max_plies = rules.pop() if rules else (None, 400)
    if seconds is None:
        return f"every game played out (checkmate or a draw; a draw after {max_plies} plies)"
    return (f"adjudicated as in the official tournament: after every move Stockfish 15.1 at full strength "
            f"({seconds} s) declares a win for a side it rates above 1300 cp or with a mate score (the judge's "
            f"verdicts are counted among wins and losses); a draw after {max_plies} plies")


def build_card(run: Path, data: Path, name: str, train_minutes: float) -> dict:
    evals = run / "eval"
    static = json.loads((evals / "static.json").read_text())
    puzzles = {Path(k).stem: v for k, v in json.loads((evals / "puzzles.json").read_text()).items()}
    matches = {k: json.loads((evals / f"{k}.json").read_text()) for k in OPPONENTS if (evals / f"{k}.json").exists()}
    info = json.loads((data / "info.json").read_text())
    configs = sorted(run.glob("lightning_logs/*/config.yaml"), key=lambda p: p.stat().st_mtime)  # newest: last resume
    if not configs:
        raise SystemExit(f"{run} has no lightning_logs/*/config.yaml: pass the run folder that `zoo train` wrote")
    config_path = configs[-1]
    recipe = yaml.safe_load(config_path.read_text())
    model, trainer, datamodule = recipe["model"]["init_args"], recipe["trainer"], recipe["data"]["init_args"]
    gen, counts = info["config"], info["counts"]

    test_set = f"mini-ChessBench test split ({static['num_fens']:,} positions of held-out games)"
    metrics = [
        {"name": key, "value": round(static[f"eval_{key}"], 4), "dataset": "mini-chessbench", "dataset_name": test_set,
         "split": "test"}
        for key in ("action_accuracy", "kendall_tau", "kendall_tau_values")
    ]
    for stem in ("mate_in_2", "mate_in_3"):
        p = puzzles[stem]
        metrics.append({"name": f"{stem}_accuracy", "value": round(p["accuracy"], 4), "dataset": f"pychess-{stem}",
                        "dataset_name": f"pychess {stem}.pgn ({p['num_puzzles']} problems)", "split": "test"})
    rows = ["| opponent | games | wins | draws | losses | by the judge | score | Elo difference (95%) |",
            "|---|---|---|---|---|---|---|---|"]
    for key, r in matches.items():
        metrics.append({"name": f"score_vs_{key}", "value": round(r["score"], 3), "dataset": f"match-vs-{key}",
                        "dataset_name": f"{r['games']} games vs {OPPONENTS[key]}", "split": "match"})
        rows.append(f"| {OPPONENTS[key]} | {r['games']} | {r['wins']} | {r['draws']} | {r['losses']} | "
                    f"{r.get('adjudicated', 0)} | {r['score']:.3f} | {_elo(r)} |")

    devices = trainer.get("devices", 1)
    batch = datamodule["batch_size"] * (devices if isinstance(devices, int) else 1)
    steps = trainer["max_steps"]
    av = model["policy"] == "action_value"
    records, unit = (counts["train"]["action_values"], "action values") if av else (counts["train"]["positions"], "positions")
    sigma = model.get("hl_gauss_sigma")
    targets = f"HL-Gauss targets (sigma {sigma} buckets)" if sigma else "the official cross-entropy targets"
    if model.get("action_embedding_init") == "squares":
        targets += ", the token table started from shared from-/to-square vectors"
    elif model.get("action_embedding_init") == "board":
        targets += (", the token table started from shared from-/to-square vectors that include the position rows "
                    "of those squares' board tokens")
    if model.get("move_square_lookup"):
        targets += (", the first layer's heads 0 and 1 started as look-ups that copy the pieces on each move's "
                    "from- and to-square into the move token (move_square_lookup)")
    if datamodule.get("mirror_augment"):
        targets += ", half the training samples mirrored (colours swapped, board flipped)"
    processes = f"{devices} CPU processes (DDP)" if devices != 1 else "one CPU process"
    training = "\n".join([
        f"Data: a mini-ChessBench made here with `recipes/chess/make_data_small.sh` (`zoo chess make-data`, seed "
        f"{gen['seed']}): {gen['num_games']} games from gnuchess-book openings (up to {gen['max_book_plies']} book "
        f"plies), continued by Stockfish 15.1 (Debian) self-play at depth {gen['selfplay_depth']} with "
        f"{gen['random_move_prob']:.0%} random moves; every legal move of every position analysed by Stockfish 15.1 "
        f"at depth {gen['depth']}; split by game ({gen['test_fraction']:.0%} test).",
        "",
        "| split | positions | action values |",
        "|---|---|---|",
        *(f"| {s} | {counts[s]['positions']:,} | {counts[s]['action_values']:,} |" for s in ("train", "test")),
        "",
        f"Training: {steps:,} steps of {batch} sequences ({steps * batch / records:.1f} epochs of the {records:,} "
        f"{unit}), Adam at {model['learning_rate']} with {model.get('warmup_steps', 0)} warm-up steps and a cosine "
        f"decay to zero, {targets}, gradient clipping 1.0; {processes}, {train_minutes:.0f} min here.",
        "",
        "Evaluation (`recipes/chess/build_small.sh`): the official static metrics on the test split; the pychess "
        "mate-in-2 and mate-in-3 problems (the model must find every move of the solution, or mate otherwise); "
        f"matches from gnuchess-book openings (6 plies), colours swapped every game, {_match_rule(matches)}:",
        "",
        *rows,
    ])
    return {
        "name": name,
        "description": (
            f"A ChessBench transformer trained in the zoo: {POLICY_WORDS[model['policy']]}, {model['num_layers']} layers, "
            f"width {model['embedding_dim']}, on a mini-ChessBench generated here with Stockfish 15.1. It plays "
            "without search: one batched forward pass over the legal moves per move."
        ),
        "license": "apache-2.0",
        "paper": "https://arxiv.org/abs/2402.04494",
        "datasets": ["mini-chessbench"],
        "tags": ["chess", model["policy"], "searchless"],
        "recipe": "recipes/chess/build_small.sh",
        "usage": "\n".join([
            "import chess, zoo",
            f'engine = zoo.load("{name}").engine()',
            "board = chess.Board()",
            "print(engine.play(board))                  # the model's move",
            "print(engine.analyse(board).ranked()[:5])  # its top moves with win probabilities",
            f"# a UCI engine for any chess GUI: zoo chess uci {name}",
        ]),
        "metrics": metrics,
        "training": training,
        "limitations": (
            f"A small model trained for {train_minutes:.0f} minutes on CPU cores from {counts['train']['positions']:,} "
            "positions: it is far weaker than the official ChessBench models (chess-9m and up), which saw billions "
            "of action values. "
            f"{_against_the_aims(matches, puzzles)} "
            "Test positions come from the same generator as the training games (book openings, self-play with "
            "random moves), not from human games."
        ),
    }


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("run", type=Path)
    parser.add_argument("data", type=Path)
    parser.add_argument("name")
    parser.add_argument("--train-minutes", type=float, required=True, help="wall time of the training run")
    args = parser.parse_args(argv)
    yaml.safe_dump(build_card(args.run, args.data, args.name, args.train_minutes), sys.stdout, sort_keys=False,
                   allow_unicode=True, width=120)


if __name__ == "__main__":
    main()
