"""Catalog entries: the zoo's own byte-level base and its two deltas, and the official BitDelta Mistral-7B deltas.

Each official delta is one ``<folder>/diff.pt`` of ``FasterDecoding/BitDelta_Mistral_combo``, fetched into the HF
cache at the LFS sha256 the Hub announces and converted on first load (:func:`zoo.bitdelta.convert.from_upstream`)
into a zoo delta naming its base. No commit of that repo could be measured offline: entries follow ``main`` and each
file is pinned on first download (trust on first use). ``zoo release`` publishes the converted repos.
"""

from zoo.registry import FileSpec, ModelEntry, read_pins

HF_REPO = "FasterDecoding/BitDelta_Mistral_combo"
BASE = "mistralai/Mistral-7B-v0.1"
PAPER = "https://arxiv.org/abs/2402.10193"
PINS = read_pins(__package__)  # pins.json: the zoo repos' files (written by `zoo release`)
# one official diff.pt: 1-bit masks of the 224 projections plus bf16 embeddings, norms and lm_head (spec: 1.397e9 B)
DIFF_BYTES = 1_397_000_000

# zoo name suffix -> (Hub folder, fine-tuned model it compresses)
_OFFICIAL = {
    "openchat-3.5": ("openchat_3.5_bitdelta", "openchat/openchat_3.5"),
    "zephyr-7b-beta": ("zephyr-7b-beta_bitdelta", "HuggingFaceH4/zephyr-7b-beta"),
    "instruct-v0.1": ("Mistral-7B-Instruct-v0.1_bitdelta", "mistralai/Mistral-7B-Instruct-v0.1"),
    "dolphin-2.2.1": ("dolphin-2.2.1-mistral-7b_bitdelta", "ehartford/dolphin-2.2.1-mistral-7b"),
    "openhermes-2": ("OpenHermes-2-Mistral-7B_bitdelta", "teknium/OpenHermes-2-Mistral-7B"),
    "openorca": ("Mistral-7B-OpenOrca_bitdelta", "Open-Orca/Mistral-7B-OpenOrca"),
}


def _model(name: str, pins: dict, description: str, **fields) -> ModelEntry:
    return ModelEntry(name=name, method="bitdelta", **pins, paper=PAPER, description=description, **fields)


def _entry(suffix: str, folder: str, finetune: str) -> ModelEntry:
    name, path = f"bitdelta-mistral-7b-{suffix}", f"{folder}/diff.pt"
    return _model(
        name, PINS.get(name, {}),
        f"Official BitDelta of {finetune} against {BASE}: 1-bit signs and one distilled scale for each of the 224 "
        "attention/MLP projections, plus the fine-tune's embeddings, norms and lm_head in full precision (about 1.4 "
        "GB). zoo.load fetches the base from the Hugging Face Hub and applies the delta.",
        upstream=(FileSpec(path, None, None, url=f"hf://{HF_REPO}/{path}"),),
        converter="zoo.bitdelta.convert:from_upstream", convert_args={"base": BASE, "num_modules": 224},
        architecture={"base": BASE, "finetune": finetune, "num_modules": 224, "hf_folder": folder},
        download_size=DIFF_BYTES)


BYTES_BASE = _model(
    "llama-bytes-3m", PINS["llama-bytes-3m"],
    "Byte-level Llama pretrained in the zoo on Shakespeare, Vim help and pydoc; the base of the zoo's BitDelta family",
    architecture={"model_type": "llama", "layers": 4, "hidden_size": 256, "heads": "8/4", "vocab": "bytes",
                  "parameters": 3_279_104, "dtype": "bfloat16"},
    license="apache-2.0", metrics={"val_ppl": 5.534, "val_bits_per_byte": 2.468},
    recipe="recipes/bitdelta/base-pretrain.yaml")


def _family_delta(corpus: str, author: str, held_out: str, metrics: dict) -> ModelEntry:
    name = f"llama-bytes-3m-{corpus}-bitdelta"
    return _model(
        name, PINS[name],
        f"The zoo's fine-tune of llama-bytes-3m on {author} as a 0.63 MiB BitDelta (1-bit signs, distilled scales); "
        f"perplexity on held-out {held_out}",
        architecture={"model_type": "bitdelta", "base": "llama-bytes-3m", "compressed_layers": 28,
                      "carried_dtype": "bfloat16"},
        license="apache-2.0", metrics=metrics, recipe="recipes/bitdelta/build_family.sh", base_model="llama-bytes-3m")


FAMILY_DELTAS = [
    _family_delta("austen", "Jane Austen's novels", "Persuasion",
                  {"val_ppl": 4.105, "recovered": 0.958, "base_val_ppl": 5.995, "finetune_val_ppl": 4.037}),
    _family_delta("milton", "Milton's poems and prose", "Paradise Regained",
                  {"val_ppl": 5.254, "recovered": 0.953, "base_val_ppl": 6.552, "finetune_val_ppl": 5.197}),
]

ENTRIES = [BYTES_BASE, *FAMILY_DELTAS] + [_entry(suffix, folder, finetune) for suffix, (folder, finetune) in _OFFICIAL.items()]
