"""The named LineFit checkpoints (torch-free)."""

from zoo.registry import FileSpec, ModelEntry, read_pins

PINS = read_pins(__package__)

ENTRIES: list[ModelEntry] = [
    ModelEntry(  # converted from the authors' file on first load
        name="linefit-official",
        method="linefit",
        upstream=(FileSpec("official.safetensors", None, None, url="hf://authors/linefit/official.safetensors"),),
        converter="zoo_linefit.convert:from_upstream",
        convert_args={"features": 4},
        description="the authors' weights",
    ),
    # released: its repo's files are pinned in pins.json (the plugin test pins the model it published)
    *(ModelEntry(name=name, method="linefit", **pins, description="fine-tuned") for name, pins in PINS.items()),
]
