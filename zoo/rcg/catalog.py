"""RCG catalog entries (torch-free).

The official ImageNet 256x256 checkpoints are converted on first load (``zoo.rcg.convert:from_upstream``): a
MAGE checkpoint (which contains the MoCo v3 encoder and the VQGAN) plus an RDM checkpoint. The download links are
the ones in the official README (LTH14/rcg; its Google Drive file ids, in Drive's direct-download form, which
skips the confirmation page of large files). Their sha256 was never measured here, so it is pinned on first
download.
"""

from zoo.registry import FileSpec, ModelEntry

PAPER = "https://arxiv.org/abs/2312.03701"
CONVERTER = "zoo.rcg.convert:from_upstream"
LICENSE = "MIT (LTH14/rcg code); see the official repository for the weights"


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


def _entry(name: str, files, arch, defaults, metrics, description) -> ModelEntry:
    return ModelEntry(
        name=name, method="rcg", source="upstream", repo=f"upstream/{name}", files=files, architecture=arch,
        converter=CONVERTER, license=LICENSE, paper=PAPER, description=description, metrics=metrics,
        recipe="recipes/rcg/imagenet256_mage_l.yaml" if "mage-b" not in name else "recipes/rcg/imagenet256_mage_b.yaml",
        defaults=defaults,
    )


# trained here (recipes/rcg/build_fmnist.sh); FIDs over 2,000 samples against the 10,000 test images
FASHIONMNIST_FILES = (
    FileSpec("README.md", "b303d2c42d1e65b901e231259d0491d303ad9b0de784f70f2c1931f475e8d154", 6697),
    FileSpec("config.json", "1672311c10b4407b980489fbf28d2661bbd6f4aa6fa35493bc2a123f91070d46", 1264),
    FileSpec("model.safetensors", "ad2e84303ab77032fbbdd01731c98e43b5734fe925f2f8fdaf9836a967f5640d", 16200368),
    FileSpec("samples_baseline_t4.png", "e0b436c88cbb815ed6b23aac969d9d477d59fb57908fcbfce174893fb085f85a", 94302),
    FileSpec("samples_rcg_cfg0_t1.png", "24ea17f6a631177287e74d367fd536e69445bcefe29f7d977f4d5a1c9c590c00", 90496),
    FileSpec("samples_rcg_cfg3_t1.png", "20aa5a970e40d05a22b477f6c0b58475d8c6dec1cb4356329b3262c0a8673e3b", 92248),
)
FASHIONMNIST_METRICS = {"fid": 45.9, "fid_baseline": 48.4, "fid_no_cfg": 48.1, "fid_tokenizer": 37.8}

ENTRIES = [
    ModelEntry(
        name="rcg-fashionmnist", method="rcg", source="embedded", repo="rcg-fashionmnist",
        files=FASHIONMNIST_FILES,
        architecture={"image_size": 28, "tokens": "7x7 of 256 codes", "encoder": "ViT 3 x 64, rep_dim 64",
                      "rdm": "SimpleMLP 6 x 512", "mage": "6 x 192 + decoder 2 x 128", "parameters": 8_083_983,
                      "dtype": "float16"},
        license="mit", paper=PAPER, recipe="recipes/rcg/build_fmnist.sh", metrics=FASHIONMNIST_METRICS,
        description="RCG trained in the zoo on Fashion-MNIST (all four stages, two CPU cores); FIDs of 2,000 "
                    "samples: RCG (guidance 3, temperature 1: the defaults), the unconditional MAGE baseline at its "
                    "best temperature (4), RCG without guidance, and the tokenizer's reconstructions (the floor of "
                    "both generators)",
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
