"""Catalog entries: the zoo's own byte-level base (embedded) and the official BitDelta Mistral-7B deltas
(``FasterDecoding/BitDelta_Mistral_combo``).

Each official delta is one ``<folder>/diff.pt`` of that Hub repo, converted on first load by
:func:`zoo.bitdelta.convert.from_upstream` into a zoo delta naming its base, ``mistralai/Mistral-7B-v0.1``.
The repo revision and the files' sha256 could not be measured offline: the URLs follow ``main`` and each file
is pinned by its sha256 on first download (the hub layer's trust-on-first-use for upstream files).
"""

from zoo.registry import FileSpec, ModelEntry

HF_REPO = "FasterDecoding/BitDelta_Mistral_combo"
BASE = "mistralai/Mistral-7B-v0.1"
PAPER = "https://arxiv.org/abs/2402.10193"

# zoo name suffix -> (Hub folder, fine-tuned model it compresses)
_OFFICIAL = {
    "openchat-3.5": ("openchat_3.5_bitdelta", "openchat/openchat_3.5"),
    "zephyr-7b-beta": ("zephyr-7b-beta_bitdelta", "HuggingFaceH4/zephyr-7b-beta"),
    "instruct-v0.1": ("Mistral-7B-Instruct-v0.1_bitdelta", "mistralai/Mistral-7B-Instruct-v0.1"),
    "dolphin-2.2.1": ("dolphin-2.2.1-mistral-7b_bitdelta", "ehartford/dolphin-2.2.1-mistral-7b"),
    "openhermes-2": ("OpenHermes-2-Mistral-7B_bitdelta", "teknium/OpenHermes-2-Mistral-7B"),
    "openorca": ("Mistral-7B-OpenOrca_bitdelta", "Open-Orca/Mistral-7B-OpenOrca"),
}


def _entry(suffix: str, folder: str, finetune: str) -> ModelEntry:
    path = f"{folder}/diff.pt"
    return ModelEntry(
        name=f"bitdelta-mistral-7b-{suffix}",
        method="bitdelta",
        source="upstream",
        repo=HF_REPO,
        files=(FileSpec(path, None, None, url=f"https://huggingface.co/{HF_REPO}/resolve/main/{path}"),),
        converter="zoo.bitdelta.convert:from_upstream",
        architecture={"base": BASE, "finetune": finetune, "num_modules": 224, "hf_folder": folder},
        paper=PAPER,
        description=(
            f"Official BitDelta of {finetune} against {BASE}: 1-bit signs and one distilled scale for each of the "
            "224 attention/MLP projections, plus the fine-tune's embeddings, norms and lm_head in full precision "
            "(about 1.4 GB). zoo.load fetches the base from the Hugging Face Hub and applies the delta."
        ),
    )


BYTES_BASE = ModelEntry(
    name="llama-bytes-3m",
    method="bitdelta",
    source="embedded",
    repo="llama-bytes-3m",
    files=(
        FileSpec("README.md", "437ffc7a9d4c3f9342d91ab07b177c5844367cc96ee0bba9aed62b6d066e87f5", 5553),
        FileSpec("config.json", "3a0e42093ba651ee9fb334536ed28a559a076d3f0fc16d85bfd7a00c6557a8e5", 684),
        FileSpec("model.safetensors", "860dc6dd715a13204f49c292a4b06efed5f355fea9b92fd6e5d759fa3c3df4ff", 6562616),
    ),
    architecture={"model_type": "llama", "layers": 4, "hidden_size": 256, "heads": "8/4", "vocab": "bytes",
                  "parameters": 3_279_104, "dtype": "bfloat16"},
    license="apache-2.0",
    paper=PAPER,
    description="Byte-level Llama pretrained in the zoo on Shakespeare, Vim help and pydoc; the base of the zoo's BitDelta family",
    metrics={"val_ppl": 5.534, "val_bits_per_byte": 2.468},
    recipe="recipes/bitdelta/base-pretrain.yaml",
)

def _family_delta(corpus: str, author: str, held_out: str, files: tuple[FileSpec, ...], metrics: dict) -> ModelEntry:
    return ModelEntry(
        name=f"llama-bytes-3m-{corpus}-bitdelta",
        method="bitdelta",
        source="embedded",
        repo=f"llama-bytes-3m-{corpus}-bitdelta",
        files=files,
        architecture={"model_type": "bitdelta", "base": "llama-bytes-3m", "compressed_layers": 28,
                      "carried_dtype": "bfloat16"},
        license="apache-2.0",
        paper=PAPER,
        description=(f"The zoo's fine-tune of llama-bytes-3m on {author} as a 0.63 MiB BitDelta (1-bit signs, distilled "
                     f"scales); perplexity on held-out {held_out}"),
        metrics=metrics,
        recipe="recipes/bitdelta/build_family.sh",
        base_model="llama-bytes-3m",
    )


FAMILY_DELTAS = [
    _family_delta(
        "austen", "Jane Austen's novels", "Persuasion",
        (
            FileSpec("README.md", "8ff5cfa8c89cc7d41212dfd186e0d264f73be733b1cb0e42b9702f2fde487be1", 8713),
            FileSpec("config.json", "9c18a55ce0a5862655150afdea07c1f853cd8e2b446c6624df504991db716d8c", 4198),
            FileSpec("model.safetensors", "6f36ee98a001c0a38d7abb5df35fb82eefd67a31b3ad7171512153f5144c5adc", 669728),
        ),
        {"val_ppl": 4.105, "recovered": 0.958, "base_val_ppl": 5.995, "finetune_val_ppl": 4.037},
    ),
    _family_delta(
        "milton", "Milton's poems and prose", "Paradise Regained",
        (
            FileSpec("README.md", "592e9c1cb27f5f5e9d616a4bc7e953ce98f8a3f49e6ac2a658461c7e1f994152", 8800),
            FileSpec("config.json", "9c18a55ce0a5862655150afdea07c1f853cd8e2b446c6624df504991db716d8c", 4198),
            FileSpec("model.safetensors", "865b6d6e3d23c2d928b0a44b37cc9d934b006674d0b5f217507d54adb9e33c27", 669728),
        ),
        {"val_ppl": 5.254, "recovered": 0.953, "base_val_ppl": 6.552, "finetune_val_ppl": 5.197},
    ),
]

ENTRIES = [BYTES_BASE, *FAMILY_DELTAS] + [_entry(suffix, folder, finetune) for suffix, (folder, finetune) in _OFFICIAL.items()]
