"""EScAIP as a TorchSim model (``pip install "lightning-zoo[torchsim]"``, PyPI ``torch-sim-atomistic``): MD and
relaxations of many systems at once with ``torch_sim``'s integrators, as ``EScAIPModule.predict`` gives them."""

from __future__ import annotations

import torch
from torch import Tensor

from zoo.escaip.graph import SkinCandidates

try:
    from torch_sim.models.interface import ModelInterface
except ImportError:
    raise ImportError("EScAIP as a TorchSim model needs torch-sim-atomistic: "
                      'pip install "lightning-zoo[torchsim]"') from None

__all__ = ["EScAIPTorchSimModel"]


class EScAIPTorchSimModel(ModelInterface):
    """Energy (n_systems,), forces (n_atoms, 3) and, for gradient-force models, stress (n_systems, 3, 3) of a
    TorchSim state, in eV and Å, in the state's dtype. Build it with ``EScAIPModule.as_torchsim_model()``.

    Successive steps of the same systems reuse their neighbour candidates within the search radius plus ``skin``
    (Å), as the ASE calculator does (``graph.SkinCandidates``); ``compile=True`` runs the whole batch through
    ``torch.compile`` (``EScAIP.compile_inference``): one compile for the batch's shape, for long runs of the same
    systems."""

    def __init__(self, module, *, compute_stress: bool = False, skin: float = 0.5, compile: bool = False):
        super().__init__()
        if compute_stress and not module.model.gradient:
            raise ValueError("this EScAIP model predicts forces directly, so it has no stress; "
                             "use a gradient-force model")
        self.module = module.eval()
        weights = next(module.parameters())
        self._device, self._dtype = weights.device, weights.dtype
        self._compute_forces = module.cfg.regress_forces
        self._compute_stress = compute_stress
        self._memory_scales_with = "n_atoms"  # a k-nearest-neighbour graph: a bounded number of slots per atom
        self._compiled = compile
        self._candidates = SkinCandidates(module.cfg.graph, skin, first_call=compile)
        if compile:
            module.model.compile_inference()  # compiles nothing yet: a missing C++ toolchain is reported here

    def forward(self, state, **kwargs) -> dict[str, Tensor]:
        system_idx = state.system_idx
        if (system_idx.diff() < 0).any():
            raise ValueError("the state's atoms must be grouped by system (system_idx non-decreasing)")
        natoms = torch.bincount(system_idx, minlength=state.n_systems)
        batch = {
            "pos": state.positions,
            "atomic_numbers": state.atomic_numbers,
            "cell": state.row_vector_cell,  # TorchSim keeps lattice vectors as columns
            "pbc": torch.as_tensor(state.pbc, device=self._device).expand(state.n_systems, 3),
            "natoms": natoms,
        }
        out = self.module.predict(batch, stress=self._compute_stress, candidates=self._candidates,
                                  compiled=self._compiled)
        return {key: value.to(state.positions.dtype) for key, value in out.items()}  # the state's precision
