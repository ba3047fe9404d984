"""The authors' format (``official.w``, ``official.b``) to a zoo repo folder."""

from safetensors.torch import load_file

from zoo_linefit.module import LineFit


def from_upstream(files, out_dir, entry) -> None:
    raw = load_file(str(files["official.safetensors"]))
    model = LineFit(**entry.convert_args)
    model.load_weights_({"net.weight": raw.pop("official.w"), "net.bias": raw.pop("official.b")})
    if raw:
        raise ValueError(f"unexpected official tensors: {sorted(raw)}")
    model.save_pretrained(out_dir)
