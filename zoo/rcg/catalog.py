"""RCG catalog entries (torch-free).

The official ImageNet 256x256 checkpoints are converted on first load (``zoo.rcg.convert:from_upstream``): a
MAGE checkpoint (which contains the MoCo v3 encoder and the VQGAN) plus an RDM checkpoint. The download links are
the ones in the official README (LTH14/rcg; its Google Drive file ids, in Drive's direct-download form, which
skips the confirmation page of large files). Their sha256 was never measured here, so it is pinned on first
download.
"""

from zoo.registry import FileSpec, ModelEntry, read_pins

PAPER = "https://arxiv.org/abs/2312.03701"
CONVERTER = "zoo.rcg.convert:from_upstream"
LICENSE = "MIT (LTH14/rcg code); see the official repository for the weights"
PINS = read_pins(__package__)  # pins.json: the zoo repos' files (written by `zoo release`)


def _drive(file_id: str) -> str:
    return f"https://drive.usercontent.google.com/download?id={file_id}&export=download&confirm=t"


_MAGE_B = FileSpec("mage-vitb.pth", None, None, _drive("1iZY0ujWp5GVochTLj0U6j4HgVTOyWPUI"))
_MAGE_L = FileSpec("mage-vitl.pth", None, None, _drive("1nQh9xCqjQCd78zKwn2L9eLfLyVosb1hp"))
_RDM_B = FileSpec("rdm-mocov3vitb.pth", None, None, _drive("1gdsvzKLmmBWuF4Ymy4rQ_T1t6dDHnTEA"))
_RDM_L = FileSpec("rdm-mocov3vitl.pth", None, None, _drive("1E5E3i9LRpSy0tVF7NA0bGXEh4CrjHAXz"))
_RDM_B_CC = FileSpec("rdm-mocov3vitb-classcond.pth", None, None, _drive("1roanmVfg-UaddVehstQErvByqi0OYs2R"))
_RDM_L_CC = FileSpec("rdm-mocov3vitl-classcond.pth", None, None, _drive("1lZmXOcdHE97Qmn2azNAo2tNVX7dtTAkY"))

# converter overrides: head counts are not stored in the weights
_ARCH_B = {"encoder": {"num_heads": 12}, "mage": {"num_heads": 12, "decoder_num_heads": 16}}
_ARCH_L = {"encoder": {"num_heads": 16}, "mage": {"num_heads": 16, "decoder_num_heads": 16}}
# sampling settings of the paper's best results (RDM: 250 DDIM steps, eta 1; MAGE: 20 iterations)
_SAMPLE_B = {"cfg": 1.0, "temperature": 6.0, "steps": 20, "rdm_steps": 250, "eta": 1.0}
_SAMPLE_L = {"cfg": 6.0, "temperature": 11.0, "steps": 20, "rdm_steps": 250, "eta": 1.0}


# bytes of the official MAGE + RDM pickles, measured on files in the official layout with the same keys, shapes and
# dtypes (benchmarks/bench_real_size.py; no optimizer state)
_DOWNLOAD_BYTES = {(_MAGE_L, _RDM_L): 4_960_000_000}


def _entry(name: str, files, arch, defaults, metrics, description) -> ModelEntry:
    size = "L" if arch is _ARCH_L else "B"
    architecture = {"encoder": f"MoCo v3 ViT-{size}", "rdm": "SimpleMLP", "mage": f"MAGE-{size}", "image_size": 256,
                    "tokens": "16x16 VQGAN codes"}
    return ModelEntry(
        name=name, method="rcg", **PINS.get(name, {}), upstream=files, architecture=architecture,
        converter=CONVERTER, convert_args=arch, license=LICENSE, paper=PAPER, description=description, metrics=metrics,
        recipe=f"recipes/rcg/imagenet256_mage_{size.lower()}.yaml", defaults=defaults,
        download_size=_DOWNLOAD_BYTES.get(files))


# trained here (recipes/rcg/build_fmnist.sh); FIDs of 10,000 samples (the tokenizer's: 2,000) against the 10,000 test images
FASHIONMNIST_METRICS = {"fid": 40.8, "fid_baseline": 42.9, "fid_no_cfg": 41.3, "fid_tokenizer": 37.8}

ENTRIES = [
    ModelEntry(
        name="rcg-fashionmnist", method="rcg", **PINS["rcg-fashionmnist"],
        architecture={"image_size": 28, "tokens": "7x7 of 256 codes", "encoder": "ViT 3 x 64, rep_dim 64",
                      "rdm": "SimpleMLP 6 x 512", "mage": "6 x 192 + decoder 2 x 128", "parameters": 8_083_983,
                      "dtype": "float16"},
        license="mit", paper=PAPER, recipe="recipes/rcg/build_fmnist.sh", metrics=FASHIONMNIST_METRICS,
        description="RCG trained in the zoo on Fashion-MNIST (all four stages, two CPU cores); FIDs of 10,000 "
                    "samples: RCG (guidance 3, temperature 4: the defaults), RCG without guidance (temperature 4), "
                    "the unconditional MAGE baseline at its best temperature (6); and of the tokenizer's "
                    "reconstructions of 2,000 images (the floor of both generators)",
    ),
    _entry(
        "rcg-imagenet256", (_MAGE_L, _RDM_L), _ARCH_L, _SAMPLE_L,
        {"dataset": "ImageNet 256x256", "num_samples": 50000, "fid": 2.15, "inception_score": 253.4,
         "fid_no_cfg": 3.44, "inception_score_no_cfg": 186.9, "reference": "ADM ImageNet 256 statistics"},
        "RCG unconditional ImageNet 256x256: MoCo v3 ViT-L representations, ViT-L RDM (SimpleMLP, 12 blocks, "
        "width 1536) and MAGE-L; CFG 6.0, temperature 11.",
    ),
    _entry(
        "rcg-imagenet256-mage-b", (_MAGE_B, _RDM_B), _ARCH_B, _SAMPLE_B,
        {"dataset": "ImageNet 256x256", "num_samples": 50000, "fid": 3.19, "inception_score": 214.9,
         "fid_no_cfg": 3.98, "inception_score_no_cfg": 177.8, "reference": "ADM ImageNet 256 statistics"},
        "RCG unconditional ImageNet 256x256 with MAGE-B on MoCo v3 ViT-B representations; CFG 1.0, temperature 6.",
    ),
    _entry(
        "rcg-imagenet256-classcond", (_MAGE_L, _RDM_L_CC), _ARCH_L, _SAMPLE_L,
        {"dataset": "ImageNet 256x256", "num_samples": 50000, "fid": 2.25, "inception_score": 300.7,
         "fid_no_cfg": 2.99, "inception_score_no_cfg": 215.5, "reference": "ADM ImageNet 256 statistics"},
        "RCG class-conditional ImageNet 256x256: class-conditional ViT-L RDM + MAGE-L; pass labels to sample().",
    ),
    _entry(
        "rcg-imagenet256-mage-b-classcond", (_MAGE_B, _RDM_B_CC), _ARCH_B, _SAMPLE_B,
        {"dataset": "ImageNet 256x256", "num_samples": 50000, "fid": 3.18, "inception_score": 242.6,
         "fid_no_cfg": 3.50, "inception_score_no_cfg": 194.9, "reference": "ADM ImageNet 256 statistics"},
        "RCG class-conditional ImageNet 256x256: class-conditional ViT-B RDM + MAGE-B; pass labels to sample().",
    ),
]
