"""EScAIP (fairchem "V2"): attention over each atom's neighbour slots, as plain ``nn.Module``s.

Module and parameter names follow fairchem's ``EScAIPBackbone`` and heads, so a state dict with official key
names (``backbone.*``, ``output_heads.<head>.*``) loads as is. Two residual streams run through the blocks:
node (N, H) and edge (N, K, H), where K is the number of neighbour slots of every atom (slot 0 = self-loop).

Everything EScAIP takes from spherical harmonics depends only on sum_m Y_lm(a) Y_lm(b) = (2l+1) P_l(a.b),
so the frequency embedding and the bond-orientational order are computed with Legendre polynomials of the
cosines between slot directions; unlike the official code, this runs in float64 too.
"""

from __future__ import annotations

import copy
import functools
import math
import os
import shutil
import sysconfig
from collections.abc import Iterator
from dataclasses import asdict, dataclass, field, fields
from typing import Any

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch import Tensor

from zoo.escaip.graph import (CandidateTable, GraphConfig, NeighborGraph, candidate_table, check_slots, ranked_graph,
                              safe_norm)
from zoo.hparams import dataclass_from_dict

__all__ = ["EScAIPConfig", "EScAIP", "EScAIPBackbone", "HEAD_TYPES", "head_type", "CONFIGS"]


# ============================================================================= config
@dataclass
class EScAIPConfig:
    """Every ``EScAIPBackbone`` argument under its fairchem name (including the ``freequency_list`` spelling)."""

    regress_forces: bool = True
    direct_forces: bool = True
    hidden_size: int = 512
    num_layers: int = 10
    activation: str = "gelu"
    regress_stress: bool = False
    use_compile: bool = True  # no effect here (the official code compiles for static shapes)
    use_padding: bool = True  # no effect here (padding to max_atoms does not change results)
    use_fp16_backbone: bool = False
    dataset_list: list = field(default_factory=list)
    # graph
    use_pbc: bool = True
    max_num_elements: int = 110
    max_atoms: int = 500  # only sizes the official padding
    max_batch_size: int = 64  # only sizes the official padding
    max_radius: float = 6.0
    knn_k: int = 30
    knn_soft: bool = True
    knn_sigmoid_scale: float = 0.2
    knn_lse_scale: float = 0.1
    knn_use_low_mem: bool = True
    knn_pad_size: int = 45
    distance_function: str = "gaussian"
    use_envelope: bool = True
    # gnn
    atten_name: str = "memory_efficient"  # attention kernel choice; all give the same math
    atten_num_heads: int = 8
    atom_embedding_size: int = 128
    node_direction_embedding_size: int = 64
    node_direction_expansion_size: int = 10
    edge_distance_expansion_size: int = 600
    edge_distance_embedding_size: int = 512
    readout_hidden_layer_multiplier: int = 2
    output_hidden_layer_multiplier: int = 2
    ffn_hidden_layer_multiplier: int = 2
    use_angle_embedding: str = "none"
    angle_expansion_size: int = 10
    angle_embedding_size: int = 8
    use_graph_attention: bool = False
    use_message_gate: bool = False
    use_global_readout: bool = False
    use_frequency_embedding: bool = True
    freequency_list: list = field(default_factory=lambda: [20, 10, 4, 10, 20])
    energy_reduce: str = "sum"
    # reg
    normalization: str = "rmsnorm"
    mlp_dropout: float = 0.0
    atten_dropout: float = 0.0
    stochastic_depth_prob: float = 0.0
    node_ffn_dropout: float = 0.0
    edge_ffn_dropout: float = 0.0
    scalar_output_dropout: float = 0.0
    vector_output_dropout: float = 0.0
    # zoo: how candidate pairs are found ("cell_list": linear; "all_pairs": the official quadratic search)
    neighbor_search: str = "cell_list"
    # zoo: weight each slot's direction in the bond-orientational order by its envelope attention weight. The
    # official plain mean over kept slots jumps when an atom enters or leaves them: energy not conserved in MD
    smooth_boo: bool = False

    def __post_init__(self) -> None:
        problems = []
        if self.hidden_size % self.atten_num_heads:
            problems.append(f"hidden_size {self.hidden_size} is not divisible by atten_num_heads "
                            f"{self.atten_num_heads}")
        if self.use_frequency_embedding and sum(self.freequency_list) != self.head_dim:
            problems.append(f"freequency_list {self.freequency_list} sums to {sum(self.freequency_list)}, "
                            f"but it must sum to the head dim hidden_size/atten_num_heads = {self.head_dim}")
        if self.activation not in _ACTIVATIONS:
            problems.append(f"activation {self.activation!r} is not one of {sorted(_ACTIVATIONS)}")
        if self.normalization not in ("rmsnorm", "layernorm", "skip"):
            problems.append(f"normalization {self.normalization!r} is not rmsnorm, layernorm or skip")
        if self.distance_function not in ("gaussian", "sigmoid"):
            problems.append(f"distance_function {self.distance_function!r} is not supported: use gaussian or sigmoid "
                            "(the official linearsigmoid and silu variants do not run)")
        if self.energy_reduce not in ("sum", "mean"):
            problems.append(f"energy_reduce must be sum or mean, got {self.energy_reduce!r}")
        for name in ("use_angle_embedding", "use_graph_attention", "use_message_gate", "use_global_readout"):
            if getattr(self, name) not in (False, "none"):
                problems.append(f"{name} is not supported (every released EScAIP config leaves it off)")
        for name in ("mlp_dropout", "atten_dropout", "stochastic_depth_prob", "node_ffn_dropout", "edge_ffn_dropout",
                     "scalar_output_dropout", "vector_output_dropout"):
            if getattr(self, name):
                problems.append(f"{name}={getattr(self, name)} is not supported (the released configs use 0)")
        if problems:
            raise ValueError("invalid EScAIP config: " + "; ".join(problems))

    @property
    def head_dim(self) -> int:
        return self.hidden_size // self.atten_num_heads

    @property
    def gradient_forces(self) -> bool:
        return self.regress_forces and not self.direct_forces

    @functools.cached_property  # built once: torch.compile cannot trace dataclasses.fields (a graph break)
    def graph(self) -> GraphConfig:
        return GraphConfig(**{f.name: getattr(self, f.name) for f in fields(GraphConfig)})

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> "EScAIPConfig":
        """Unknown keys, wrong types and invalid combinations are a ``zoo.errors.ConfigError`` (a ValueError)."""
        return dataclass_from_dict(cls, d, "backbone", "EScAIP backbone")

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


# the authors' sizes (fairchem configs/escaip/training/backbone), run-level k=30, pad 45, rc 6, and small CPU ones
_PRODUCTION = dict(max_num_elements=110, max_radius=6.0, knn_k=30, knn_pad_size=45, knn_soft=True,
                   knn_sigmoid_scale=0.2, knn_lse_scale=0.1, knn_use_low_mem=True)
CONFIGS: dict[str, dict[str, Any]] = {
    "H512L10": dict(_PRODUCTION, hidden_size=512, num_layers=10, atten_num_heads=8),
    "H1024L8": dict(_PRODUCTION, hidden_size=1024, num_layers=8, atten_num_heads=16),
    "H640L6": dict(_PRODUCTION, hidden_size=640, num_layers=6, atten_num_heads=10),
    "small": dict(_PRODUCTION, hidden_size=128, num_layers=4, atten_num_heads=8, freequency_list=[4, 4, 4, 2, 2],
                  atom_embedding_size=64, node_direction_embedding_size=32, edge_distance_expansion_size=128,
                  edge_distance_embedding_size=128, knn_k=20, knn_pad_size=32, max_radius=5.0),
    "tiny": dict(_PRODUCTION, hidden_size=32, num_layers=2, atten_num_heads=2, freequency_list=[4, 4, 4, 2, 2],
                 atom_embedding_size=8, node_direction_embedding_size=8, node_direction_expansion_size=4,
                 edge_distance_expansion_size=16, edge_distance_embedding_size=16, knn_k=10, knn_pad_size=20,
                 max_radius=4.5),
}

# ============================================================================= layer primitives
class SquaredReLU(nn.Module):
    def forward(self, x: Tensor) -> Tensor:
        return F.relu(x).square()


# nn.GELU is the exact erf form, as fairchem's
_ACTIVATIONS = {"gelu": nn.GELU, "relu": nn.ReLU, "leaky_relu": nn.LeakyReLU, "squared_relu": SquaredReLU}


def make_norm(kind: str, size: int) -> nn.Module:
    if kind == "rmsnorm":
        return nn.RMSNorm(size)  # eps=None: the machine epsilon of the input dtype, as fairchem
    if kind == "layernorm":
        return nn.LayerNorm(size)
    return nn.Identity()


def lin(n_in: int, n_out: int, activation: str | None) -> nn.Sequential:
    """Linear (+ activation): state-dict suffix ``.0.weight/.0.bias``."""
    layers: list[nn.Module] = [nn.Linear(n_in, n_out)]
    if activation is not None:
        layers.append(_ACTIVATIONS[activation]())
    return nn.Sequential(*layers)


def mlp(size: int, multiplier: int, activation: str) -> nn.Sequential:
    """lin(H -> mH, act) then lin(mH -> H); a single lin(H -> H, act) when the multiplier is 0."""
    if multiplier == 0:
        return lin(size, size, activation)
    return nn.Sequential(lin(size, multiplier * size, activation), lin(multiplier * size, size, None))


# ============================================================================= geometric inputs
@dataclass
class Geometry:
    """Parameter-free network inputs of a graph's rows (in a forward pass: of each chunk of centre atoms)."""

    graph: NeighborGraph
    unit: Tensor  # (N, K, 3) centre -> neighbour unit vectors, 0 for the self-loop and padding
    dist: Tensor  # (N, K) slot distances, 0 for the self-loop and padding
    rbf: Tensor | None  # (N, K, n_rbf) distance expansion; None where radial tables replace it
    boo: Tensor  # (N, Lb+1) bond-orientational order of each atom
    legendre: list[Tensor] | None  # per l, (N, 1, K, K) P_l(u_a . u_b), 0 for l>0 where a direction is zero
    attn_bias: Tensor  # (N, 1, 1, K) additive key bias from the envelope


def legendre_terms(cos: Tensor, nonzero: Tensor, lmax: int) -> Iterator[Tensor]:
    """P_1 .. P_lmax (cos) by Bonnet's recursion, zero where a direction is zero; a generator, so that only two
    (N, K, K) terms need be alive at once."""
    p_prev, p = torch.ones_like(cos), cos
    for l in range(1, lmax + 1):
        if l > 1:
            p_prev, p = p, ((2 * l - 1) * cos * p - (l - 1) * p_prev) / l
        yield p * nonzero


def bond_orientational_order(cos: Tensor, nonzero: Tensor, weight: Tensor, lmax: int) -> Tensor:
    """(N, lmax+1): sqrt(max(|mean over slots of Y_l(u)/sqrt(2l+1)|^2, 1e-6)), the self-loop included; the mean
    weighted by ``weight`` (N, K) (the official: 1 in kept slots, 0 in padding)."""
    pair_weight = weight[:, :, None] * weight[:, None, :]  # (N, K, K)
    count = weight.sum(1)  # (N,)
    # sum_m mean_m^2 = (1/n^2) sum_{a,b} w_a w_b P_l(u_a . u_b)
    values = [(p * pair_weight).sum((1, 2)) / count**2 for p in legendre_terms(cos, nonzero, lmax)]
    return torch.stack([torch.ones_like(count), *values], 1).clamp_min(1e-6).sqrt()


def distance_expansion(dist: Tensor, cfg: EScAIPConfig) -> Tensor:
    """(N, K) -> (N, K, n_rbf) on offsets linspace(0, rc, n)."""
    n = cfg.edge_distance_expansion_size
    offsets = torch.linspace(0, cfg.max_radius, n, dtype=dist.dtype, device=dist.device)
    delta = cfg.max_radius / (n - 1)
    x = dist[..., None] - offsets
    if cfg.distance_function == "gaussian":
        return torch.exp(-0.5 * x.square() / (2.0 * delta) ** 2)  # basis width 2 * delta
    return torch.sigmoid((2.0 / delta) * x)


def geometry(graph: NeighborGraph, cfg: EScAIPConfig, radial: list[Tensor] | None = None) -> Geometry:
    """``radial``: the ``radial_table``s that replace the distance expansion, if any."""
    dist = safe_norm(graph.disp)  # (N, K)
    nonzero_dir = dist > 0
    unit = graph.disp / torch.where(nonzero_dir, dist, torch.ones_like(dist))[..., None]
    cos = unit @ unit.transpose(1, 2)  # (N, K, K)
    nonzero = (nonzero_dir[:, :, None] & nonzero_dir[:, None, :]).to(cos.dtype)
    env = graph.env
    inside = env < 1
    e2 = torch.where(inside, env, torch.zeros_like(env)).square()
    kept_bias = -e2 / (1 - e2) if cfg.use_envelope else torch.zeros_like(env)
    bias = torch.where(inside, kept_bias, torch.full_like(env, -math.inf))
    weight = bias.exp() if cfg.smooth_boo else graph.mask.to(cos.dtype)  # (N, K)
    boo = bond_orientational_order(cos, nonzero, weight, cfg.node_direction_expansion_size - 1)
    legendre = None
    if cfg.use_frequency_embedding:
        terms = legendre_terms(cos, nonzero, len(cfg.freequency_list) - 1)
        legendre = [p[:, None] for p in (torch.ones_like(cos), *terms)]
    rbf = distance_expansion(dist, cfg) if radial is None else None
    return Geometry(graph, unit, dist, rbf, boo, legendre, bias[:, None, None, :])


# ============================================================================= radial tables (compiled inference)
# cubic pieces per width of a basis function: escaip-qm9-xtb's tables (pieces of 2.5 mÅ) follow the network within
# 6e-10 (values) and 2e-7 (slopes), relative; its forces move by less than float32 rounding does
RADIAL_PIECES_PER_WIDTH = 64
RADIAL_TABLES_MAX_BYTES = 64 << 20  # larger tables (narrow bases: the authors' 600 functions over 6 Å) are not built


def radial_step(cfg: EScAIPConfig) -> float:
    """Å per piece of a ``radial_table``: the basis width (``distance_expansion``) over ``RADIAL_PIECES_PER_WIDTH``."""
    delta = cfg.max_radius / (cfg.edge_distance_expansion_size - 1)
    width = 2.0 * delta if cfg.distance_function == "gaussian" else delta / 2
    return width / RADIAL_PIECES_PER_WIDTH


def radial_lookup(table: Tensor, dist: Tensor, step: float) -> Tensor:
    """(..., H) values at ``dist`` (...) of the piecewise cubic ``table`` (n, 4, H) (``EdgeEmbedding.radial_table``)
    with pieces of ``step``; differentiable in ``dist``. Distances past the table (only padded slots' are) use its
    last piece."""
    x = dist / step
    piece = x.detach().floor().clamp(0, len(table) - 1)
    t = (x - piece)[..., None]
    c = table[piece.long()]  # (..., 4, H)
    return c[..., 0, :] + t * (c[..., 1, :] + t * (c[..., 2, :] + t * c[..., 3, :]))


# ============================================================================= backbone blocks
EDGE_CHUNK_ELEMENTS = 1 << 20  # atoms x slots x hidden of one chunk of edge work (4 MB in float32)
# what one more chunk costs, in edges: its share of Python and kernel-launch overhead across the layers
CHUNK_COST_EDGES = 256


def row_chunks(n_atoms: int, slots: int, hidden: int) -> list[int]:
    """Sizes of consecutive centre-atom ranges whose edge tensors hold about ``EDGE_CHUNK_ELEMENTS`` values each,
    so that each chunk's chain of (memory-bound) edge ops stays in the CPU cache; edges of different atoms never
    mix."""
    size = max(1, EDGE_CHUNK_ELEMENTS // max(slots * hidden, 1))
    return [min(size, n_atoms - start) for start in range(0, n_atoms, size)]


def width_plan(kept: list[int], hidden: int) -> list[tuple[int, int]]:
    """(rows, slots) of each chunk for centre atoms sorted by the neighbours they keep (``kept``, descending): a
    chunk is as wide as its first row, so padding shrinks with more chunks, each costing ``CHUNK_COST_EDGES``.
    The cheapest cut into runs at changes of width (dynamic programming over them), each run then cut into
    ``row_chunks``."""
    if not kept:
        return [(0, 1)]
    starts = [i for i in range(len(kept)) if i == 0 or kept[i] != kept[i - 1]] + [len(kept)]

    def run(i: int, j: int) -> list[tuple[int, int]]:  # rows starts[i]:starts[j], as wide as the first
        width = max(kept[starts[i]], 1)
        return [(rows, width) for rows in row_chunks(starts[j] - starts[i], width, hidden)]

    best: list[tuple[int, list[tuple[int, int]]]] = [(0, [])]  # (cost, plan) of the first j runs, the cheapest
    for j in range(1, len(starts)):
        options = []
        for i in range(j):
            last = run(i, j)
            cost = sum(CHUNK_COST_EDGES + rows * width for rows, width in last)
            options.append((best[i][0] + cost, best[i][1] + last))
        best.append(min(options, key=lambda option: option[0]))
    return best[-1][1]


@dataclass
class EdgeRows:
    """The per-slot inputs of one chunk of centre atoms (a chunk's ``Geometry``)."""

    sizes: list[int]  # centre atoms of every chunk (to split per-atom tensors the same way)
    index: Tensor  # (R, K)
    mask: Tensor  # (R, K)
    unit: Tensor  # (R, K, 3)
    dist: Tensor  # (R, K)
    rbf: Tensor | None  # (R, K, n_rbf)
    attn_bias: Tensor  # (R, 1, 1, K)
    legendre: list[Tensor] | None  # per l, (R, 1, K, K)

    @classmethod
    def of(cls, geo: Geometry, sizes: list[int]) -> "EdgeRows":
        return cls(sizes, geo.graph.index, geo.graph.mask, geo.unit, geo.dist, geo.rbf, geo.attn_bias, geo.legendre)


@dataclass
class AtomInputs:
    """The per-atom network inputs (``Geometry`` fields of every chunk, joined)."""

    atomic_numbers: Tensor  # (N,)
    boo: Tensor  # (N, Lb+1)
    radial: list[Tensor] | None  # per edge embedding, its ``radial_table``


class EdgeEmbedding(nn.Module):
    """Edge inputs of one layer: [dist R | src-dir D | src-atom A | tgt-dir D | tgt-atom A] -> lin -> norm."""

    def __init__(self, cfg: EScAIPConfig):
        super().__init__()
        A, D, R = cfg.atom_embedding_size, cfg.node_direction_embedding_size, cfg.edge_distance_embedding_size
        H, n_boo, act = cfg.hidden_size, cfg.node_direction_expansion_size, cfg.activation
        self.source_atomic_embedding = nn.Embedding(cfg.max_num_elements, A)
        self.target_atomic_embedding = nn.Embedding(cfg.max_num_elements, A)
        self.source_direction_embedding = lin(n_boo, D, act)
        self.target_direction_embedding = lin(n_boo, D, act)
        self.edge_distance_embedding = lin(cfg.edge_distance_expansion_size, R, act)
        self.edge_attr_linear = lin(R + 2 * D + 2 * A, H, act)
        self.edge_attr_norm = make_norm(cfg.normalization, H)
        self.radial_step = radial_step(cfg)

    def atom_terms(self, atoms: AtomInputs) -> tuple[Tensor, Tensor]:
        """edge_attr_linear split by its input columns: the source and target columns hold per-atom values, so
        their shares are computed once per atom, (N, H) each, then gathered (source) or broadcast (target)."""
        linear = self.edge_attr_linear[0]
        n_dist = self.edge_distance_embedding[0].out_features
        n_atom = (linear.in_features - n_dist) // 2
        _, w_src, w_tgt = linear.weight.split([n_dist, n_atom, n_atom], 1)
        z = atoms.atomic_numbers
        src = F.linear(torch.cat([self.source_direction_embedding(atoms.boo), self.source_atomic_embedding(z)], -1),
                       w_src)
        tgt = F.linear(torch.cat([self.target_direction_embedding(atoms.boo), self.target_atomic_embedding(z)], -1),
                       w_tgt, linear.bias)
        return src, tgt

    def distance_share(self, rbf: Tensor) -> Tensor:
        """edge_attr_linear's share of the distance columns: (..., n_rbf) -> (..., H), a function of the distance
        alone (what ``radial_table`` tabulates)."""
        w_dist = self.edge_attr_linear[0].weight[:, :self.edge_distance_embedding[0].out_features]
        return F.linear(self.edge_distance_embedding(rbf), w_dist)

    def radial_parameters(self) -> list[Tensor]:
        """The weights ``distance_share`` reads."""
        first = self.edge_distance_embedding[0]
        return [first.weight, first.bias, self.edge_attr_linear[0].weight]

    @torch.no_grad()
    def radial_table(self, cfg: EScAIPConfig) -> Tensor:
        """``distance_share`` as cubic Hermite pieces of ``radial_step`` on [0, max_radius]: (n, 4, H) coefficients
        of t^0..t^3 (t in [0, 1) along a piece), from values and derivatives at the nodes in float64. A lookup and
        a cubic then replace, per slot, the distance expansion and two products with their activation; forces
        follow the network's within float32 rounding (``test_compiled_inference_equals_eager``)."""
        step = self.radial_step
        n = math.ceil(cfg.max_radius / step)
        exact = copy.deepcopy(self).double()
        nodes = torch.arange(n + 1, dtype=torch.float64, device=self.radial_parameters()[0].device) * step

        def share(d: Tensor) -> Tensor:
            return exact.distance_share(distance_expansion(d, cfg))

        value, slope = torch.func.jvp(share, (nodes,), (torch.ones_like(nodes),))  # (n + 1, H) each
        y0, y1, m0, m1 = value[:-1], value[1:], slope[:-1] * step, slope[1:] * step
        table = torch.stack([y0, m0, 3 * (y1 - y0) - 2 * m0 - m1, 2 * (y0 - y1) + m0 + m1], 1)
        return table.to(self.edge_attr_linear[0].weight.dtype)

    def embed_edges(self, edges: EdgeRows, src: Tensor, tgt: Tensor, radial: Tensor | None = None) -> Tensor:
        """(R, K, H) edge inputs of a chunk: ``src`` is the source share of every atom (N, H), ``tgt`` the target
        share of the chunk's centre atoms (R, H) (``atom_terms``); ``radial`` this layer's ``radial_table``, if
        any, gives the distance share."""
        if radial is None:
            dist_share = self.distance_share(edges.rbf)
        else:
            dist_share = radial_lookup(radial, edges.dist, self.radial_step)
        pre = dist_share + src[edges.index] + tgt[:, None]
        return self.edge_attr_norm(self.edge_attr_linear[1](pre))


class InputLayer(EdgeEmbedding):
    def __init__(self, cfg: EScAIPConfig):
        super().__init__(cfg)
        self.edge_ffn = mlp(cfg.hidden_size, 1, cfg.activation)

    def forward(self, edges: EdgeRows, src: Tensor, tgt: Tensor, radial: Tensor | None = None) -> Tensor:
        edge = self.embed_edges(edges, src, tgt, radial)
        return edge + self.edge_ffn(edge)


class InputBlock(nn.Module):
    def __init__(self, cfg: EScAIPConfig):
        super().__init__()
        self.input_layer = InputLayer(cfg)
        self.norm_node = make_norm(cfg.normalization, cfg.hidden_size)
        self.norm_edge = make_norm(cfg.normalization, cfg.hidden_size)

    def forward(self, atoms: AtomInputs, chunks: list[EdgeRows]) -> tuple[Tensor, list[Tensor]]:
        """node (N, H) and the edge stream as one (R, K, H) tensor per chunk."""
        src, tgt = self.input_layer.atom_terms(atoms)
        radial = atoms.radial[0] if atoms.radial is not None else None
        edges = [self.input_layer(rows, src, tgt_rows, radial)
                 for rows, tgt_rows in zip(chunks, tgt.split(chunks[0].sizes))]
        node = self.norm_node(torch.cat([edge[:, 0] for edge in edges]))  # node = the self-loop slot
        return node, [self.norm_edge(edge) for edge in edges]


class GraphAttention(EdgeEmbedding):
    """Message from (edge inputs, edge stream, both node states), then self-attention over each atom's slots."""

    def __init__(self, cfg: EScAIPConfig):
        super().__init__(cfg)
        H, act = cfg.hidden_size, cfg.activation
        self.node_hidden_linear = lin(2 * H, H, act)
        self.edge_hidden_linear = lin(H, H, act)
        self.message_linear = lin(3 * H, H, act)
        self.message_norm = make_norm(cfg.normalization, H)
        self.attn_in_proj_q = nn.Linear(H, H)
        self.attn_in_proj_k = nn.Linear(H, H)
        self.attn_in_proj_v = nn.Linear(H, H)
        self.attn_out_proj = nn.Linear(H, H)
        self.num_heads = cfg.atten_num_heads
        self.groups = list(cfg.freequency_list) if cfg.use_frequency_embedding else None
        if self.groups is not None:
            expanded = sum(r * (2 * l + 1) for l, r in enumerate(self.groups))
            self.scale = 1.0 / math.sqrt(8 * math.ceil(expanded / 8))  # SDPA scale of the padded expanded width
        else:
            self.scale = 1.0 / math.sqrt(cfg.head_dim)

    def chunk_terms(self, atoms: AtomInputs, node: Tensor, chunks: list[EdgeRows]) -> list[tuple[Tensor, ...]]:
        """Per chunk, the per-atom shares of the layer: edge_attr_linear's (``atom_terms``) and node_hidden_linear's
        on [node_j | node_i], split by input columns the same way; source/neighbour shares cover every atom,
        target/centre shares the chunk's centre atoms."""
        linear = self.node_hidden_linear[0]
        w_nbr, w_centre = linear.weight.split(node.shape[1], 1)
        src, tgt = self.atom_terms(atoms)
        node_nbr, node_centre = F.linear(node, w_nbr), F.linear(node, w_centre, linear.bias)
        sizes = chunks[0].sizes
        return [(src, tgt_rows, node_nbr, centre_rows)
                for tgt_rows, centre_rows in zip(tgt.split(sizes), node_centre.split(sizes))]

    def forward(self, edge: Tensor, edges: EdgeRows, terms: tuple[Tensor, ...], all_queries: bool = True,
                radial: Tensor | None = None) -> Tensor:
        """(R, K, H) attention output of every slot of a chunk's centre atoms, or (R, 1, H) of the self-loop only
        (``all_queries=False``); ``edge`` is their (normalised) edge stream, ``terms`` from ``chunk_terms``."""
        R, _, H = edge.shape
        src, tgt, node_nbr, node_centre = terms
        ea = self.embed_edges(edges, src, tgt, radial)  # (R, K, H)
        nh = self.node_hidden_linear[1](node_nbr[edges.index] + node_centre[:, None])
        eh = self.edge_hidden_linear(edge)
        msg = self.message_norm(self.message_linear(torch.cat([ea, eh, nh], -1)))  # (R, K, H)

        def heads(x: Tensor) -> Tensor:
            return x.view(R, -1, self.num_heads, H // self.num_heads).transpose(1, 2)  # (R, nh, K or 1, hd)

        projections = (self.attn_in_proj_k, self.attn_in_proj_v)
        if all_queries:
            projections = (self.attn_in_proj_q, *projections)
        # the projections as one product (their weights side by side); split, not sliced: a slice's backward
        # writes into a zero tensor of the whole input, one per slice
        qkv = F.linear(msg, torch.cat([p.weight for p in projections]), torch.cat([p.bias for p in projections]))
        *q, k, v = (heads(x) for x in qkv.split(H, -1))
        q = q[0] if all_queries else heads(self.attn_in_proj_q(msg[:, :1]))
        if self.groups is None:
            scores = q @ k.transpose(-1, -2)
        else:
            # sum_l P_l(u_a . u_b) <q_a, k_b>_{channels of group l}: the frequency embedding, in closed form
            scores = 0
            legendre = edges.legendre if all_queries else [p_l[:, :, :1] for p_l in edges.legendre]
            for p_l, q_l, k_l in zip(legendre, q.split(self.groups, -1), k.split(self.groups, -1)):
                scores = scores + p_l * (q_l @ k_l.transpose(-1, -2))
        scores = scores * self.scale + edges.attn_bias  # (R, nh, K or 1, K); padded keys get -inf
        attn = torch.softmax(scores, -1) @ v  # (R, nh, K or 1, hd)
        return self.attn_out_proj(attn.transpose(1, 2).flatten(2))  # (R, K or 1, H)


class FeedForward(nn.Module):
    def __init__(self, cfg: EScAIPConfig, edge: bool):
        super().__init__()
        self.mlp_node = mlp(cfg.hidden_size, cfg.ffn_hidden_layer_multiplier, cfg.activation)
        self.mlp_edge = mlp(cfg.hidden_size, cfg.ffn_hidden_layer_multiplier, cfg.activation) if edge else None


class TransformerBlock(nn.Module):
    def __init__(self, cfg: EScAIPConfig, last: bool):
        super().__init__()
        H = cfg.hidden_size
        # official quirk: with gradient forces the last block has no edge FFN (its edge output is unused)
        edge_ffn = not (last and cfg.gradient_forces)
        self.graph_attention = GraphAttention(cfg)
        self.feedforward = FeedForward(cfg, edge_ffn)
        self.norm_attn_node = make_norm(cfg.normalization, H)
        self.norm_attn_edge = make_norm(cfg.normalization, H)
        self.norm_ffn_node = make_norm(cfg.normalization, H)
        self.norm_ffn_edge = make_norm(cfg.normalization, H) if edge_ffn else None

    def forward(self, node: Tensor, edges: list[Tensor], atoms: AtomInputs, chunks: list[EdgeRows],
                radial: Tensor | None = None) -> tuple[Tensor, list[Tensor] | None]:
        """The new (node, edge chunks); no edges after a last block without edge FFN (nothing reads them)."""
        edge_out = self.feedforward.mlp_edge is not None
        terms = self.graph_attention.chunk_terms(atoms, self.norm_attn_node(node), chunks)
        self_rows, new_edges = [], []
        for rows, chunk_terms, edge in zip(chunks, terms, edges):
            # without an edge FFN nothing reads the new edges: only the self-loop's attention row is needed
            attn = self.graph_attention(self.norm_attn_edge(edge), rows, chunk_terms, edge_out, radial)
            self_rows.append(attn[:, 0])
            if edge_out:
                edge = edge + attn
                new_edges.append(edge + self.feedforward.mlp_edge(self.norm_ffn_edge(edge)))
        node = node + torch.cat(self_rows)
        node = node + self.feedforward.mlp_node(self.norm_ffn_node(node))
        return node, new_edges if edge_out else None


class ReadoutLayer(nn.Module):
    def __init__(self, cfg: EScAIPConfig):
        super().__init__()
        H, m, act = cfg.hidden_size, cfg.readout_hidden_layer_multiplier, cfg.activation
        self.node_ffn = mlp(H, m, act)
        self.pre_node_norm = make_norm(cfg.normalization, H)
        if cfg.direct_forces:
            self.edge_ffn = mlp(H, m, act)
            self.pre_edge_norm = make_norm(cfg.normalization, H)

    def forward(self, node: Tensor, edges: list[Tensor] | None) -> tuple[Tensor, list[Tensor] | None]:
        node = node + self.node_ffn(self.pre_node_norm(node))
        if not hasattr(self, "edge_ffn"):
            return node, None
        return node, [edge + self.edge_ffn(self.pre_edge_norm(edge)) for edge in edges]


class OutputProjection(nn.Module):
    def __init__(self, cfg: EScAIPConfig):
        super().__init__()
        H, n = cfg.hidden_size, cfg.num_layers + 1
        self.node_projection = lin(n * H, H, cfg.activation)
        self.output_norm_node = make_norm(cfg.normalization, H)
        if cfg.direct_forces:
            self.edge_projection = lin(n * H, H, cfg.activation)
            self.output_norm_edge = make_norm(cfg.normalization, H)

    def forward(self, nodes: list[Tensor], edges: list[list[Tensor] | None]) -> tuple[Tensor, list[Tensor] | None]:
        """nodes: per readout (N, H); edges: per readout, its chunks. Returns node (N, H) and edge chunks."""
        node = self.output_norm_node(self.node_projection(torch.cat(nodes, -1)))
        if not hasattr(self, "edge_projection"):
            return node, None
        return node, [self.output_norm_edge(self.edge_projection(torch.cat(chunk, -1))) for chunk in zip(*edges)]


class EScAIPBackbone(nn.Module):
    def __init__(self, cfg: EScAIPConfig):
        super().__init__()
        self.cfg = cfg
        self.input_block = InputBlock(cfg)
        self.transformer_blocks = nn.ModuleList([TransformerBlock(cfg, last=i == cfg.num_layers - 1)
                                                 for i in range(cfg.num_layers)])
        self.readout_layers = nn.ModuleList([ReadoutLayer(cfg) for _ in range(cfg.num_layers + 1)])
        self.output_projection = OutputProjection(cfg)

    def edge_embeddings(self) -> list[EdgeEmbedding]:
        """The layers whose ``radial_table`` ``AtomInputs.radial`` holds, in its order."""
        return [self.input_block.input_layer, *(block.graph_attention for block in self.transformer_blocks)]

    def forward(self, atoms: AtomInputs, chunks: list[EdgeRows]) -> tuple[Tensor, list[Tensor] | None]:
        """node (N, H) and, for direct forces, the edge stream as (R, K, H) per chunk of centre atoms."""
        node, edge = self.input_block(atoms, chunks)
        readouts = [self.readout_layers[0](node, edge)]
        for i, block in enumerate(self.transformer_blocks):
            node, edge = block(node, edge, atoms, chunks, atoms.radial[i + 1] if atoms.radial is not None else None)
            readouts.append(self.readout_layers[i + 1](node, edge))
        return self.output_projection([r[0] for r in readouts], [r[1] for r in readouts])


# ============================================================================= heads
class OutputLayer(nn.Module):
    """MLP then a bias-free Linear to 1 (scalar) or 3 (vector) outputs; no residual."""

    def __init__(self, cfg: EScAIPConfig, n_out: int):
        super().__init__()
        self.ffn = mlp(cfg.hidden_size, cfg.output_hidden_layer_multiplier, cfg.activation)
        self.final_output = nn.Sequential(nn.Linear(cfg.hidden_size, n_out, bias=False))

    def forward(self, x: Tensor) -> Tensor:
        return self.final_output(self.ffn(x))


class EnergyHead(nn.Module):
    def __init__(self, cfg: EScAIPConfig, apply_norm: bool = True):
        super().__init__()
        self.energy_layer = OutputLayer(cfg, 1)
        self.node_norm = make_norm(cfg.normalization, cfg.hidden_size)
        self.apply_norm = apply_norm
        self.reduce = cfg.energy_reduce

    def energy(self, node: Tensor, batch: Tensor, n_sys: int) -> Tensor:
        per_atom = self.energy_layer(self.node_norm(node) if self.apply_norm else node).squeeze(-1)
        total = per_atom.new_zeros(n_sys).index_add(0, batch, per_atom)  # (G,)
        if self.reduce == "mean":
            total = total / torch.bincount(batch, minlength=n_sys).to(total.dtype)
        return total


class DirectForceHead(nn.Module):
    """F_i = (sum over real slots of v_slot * u_slot) * s_i: learned components times the slot direction."""

    def __init__(self, cfg: EScAIPConfig):
        super().__init__()
        self.force_direction_layer = OutputLayer(cfg, 3)
        self.force_magnitude_layer = OutputLayer(cfg, 1)
        self.node_norm = make_norm(cfg.normalization, cfg.hidden_size)
        self.edge_norm = make_norm(cfg.normalization, cfg.hidden_size)

    def forces(self, node: Tensor, edges: list[Tensor], chunks: list[EdgeRows]) -> Tensor:
        direction = []
        for rows, edge in zip(chunks, edges):
            v = self.force_direction_layer(self.edge_norm(edge))  # (R, K, 3)
            direction.append((v * rows.unit * rows.mask[..., None]).sum(1))  # (R, 3)
        return torch.cat(direction) * self.force_magnitude_layer(self.node_norm(node))  # (N, 3)


# registry names and class paths of fairchem's heads -> our head kind
HEAD_TYPES = {"EScAIP_energy_head": "energy", "EScAIPEnergyHead": "energy",
              "EScAIP_direct_force_head": "direct_forces", "EScAIPDirectForceHead": "direct_forces",
              "EScAIP_grad_energy_force_stress_head": "gradient", "EScAIPGradientEnergyForceStressHead": "gradient"}


def head_type(spec: dict[str, Any]) -> str:
    module = str(spec.get("module", ""))
    kind = HEAD_TYPES.get(module.rsplit(".", 1)[-1])
    if kind is None:
        raise ValueError(f"unknown EScAIP head module {module!r}; known: {sorted(HEAD_TYPES)}")
    return kind


# ============================================================================= the whole model
# neighbour slots a compiled graph keeps beyond the most any atom kept when it was measured: the soft kNN keeps
# knn_k to knn_k + 2 (16-18 here over 2 ps of 300-600 K MD of 21-60-atom molecules), and each slot costs ~4% of a call
SLOT_MARGIN = 2
# graphs the compiled path may hold (one per system shape; all of one function): dynamo's own limit (8) would run
# every later system eagerly for the rest of the process
COMPILED_SYSTEMS = 64


def check_cpp_toolchain() -> None:
    """The compiled path's kernels and their launcher are C++ that inductor builds against Python's headers: say
    up front, in one error, what is missing, instead of inductor's traceback at the first compiled call."""
    cxx = os.environ.get("CXX") or "g++"  # inductor's own choice: $CXX, else g++
    header = os.path.join(sysconfig.get_paths()["include"], "Python.h")
    missing = [what for what, found in ((f"a C++ compiler ({cxx}; set CXX to use another)", shutil.which(cxx)),
                                        (f"Python's headers ({header})", os.path.isfile(header))) if not found]
    if missing:
        raise RuntimeError(f"compiled inference builds C++ kernels and needs {' and '.join(missing)}: install them "
                           "(Debian/Ubuntu: apt-get install g++ python3-dev), or run without compile=True")


class EScAIP(nn.Module):
    """fairchem's HydraModel layout: ``backbone`` + ``output_heads`` (one per configured head, sorted by name).

    ``forward`` returns raw (normalised) predictions: ``energy`` (G,), ``forces`` (N, 3) when forces are
    regressed, and ``stress`` (G, 3, 3) from autograd for gradient models (``stress=True`` or
    ``regress_stress``), where stress = (dE/d strain) / |det cell|.
    """

    def __init__(self, backbone: dict[str, Any], heads: dict[str, dict[str, Any]]):
        super().__init__()
        self.cfg = EScAIPConfig.from_dict(backbone)
        self.backbone = EScAIPBackbone(self.cfg)
        kinds = {name: head_type(spec) for name, spec in heads.items()}
        self.output_heads = nn.ModuleDict({
            name: DirectForceHead(self.cfg) if kind == "direct_forces"
            else EnergyHead(self.cfg, apply_norm=kind == "energy")
            for name, kind in sorted(kinds.items())
        })
        self.head_kinds = kinds
        values = sorted(kinds.values())
        self.gradient = "gradient" in values
        if self.gradient and (not self.cfg.gradient_forces or len(values) != 1):
            raise ValueError("a gradient energy/force/stress head needs direct_forces=False, regress_forces=True "
                             "and no other head")
        if not self.gradient:
            if values.count("energy") != 1:
                raise ValueError(f"a direct EScAIP model needs exactly one energy head, got heads {kinds}")
            if self.cfg.regress_forces != ("direct_forces" in values) or values.count("direct_forces") > 1:
                raise ValueError(f"heads {kinds} do not match the backbone: regress_forces={self.cfg.regress_forces}, "
                                 f"direct_forces={self.cfg.direct_forces} needs "
                                 f"{'one' if self.cfg.regress_forces else 'no'} direct force head")

    def _head(self, kind: str) -> nn.Module:
        return next(self.output_heads[n] for n, k in self.head_kinds.items() if k == kind)

    def compile_inference(self) -> None:
        """Prepare the compiled inference path that ``forward(..., compiled=True)`` takes (once; later calls keep
        what is compiled): ``torch.compile`` with static shapes, fused C++ kernels, a gradient model's backward
        traced by ``torch.func.grad`` into its forward's graph. A system's first call runs eagerly and measures the
        slots its atoms keep; later calls pad rows to that plus ``SLOT_MARGIN`` (at most ``knn_pad_size``), and a
        call where an atom keeps more runs eagerly and widens them. Each shape compiles once (about a minute;
        seconds from inductor's on-disk cache in a later process): for MD of one system. A process keeps the graphs
        of up to ``COMPILED_SYSTEMS`` shapes (dynamo's recompile limit, 8, is raised for these calls only).

        Per call, a 21-atom molecule's ~170 kernels are launched from C++ (``cpp_wrapper``: 1.4 ms less than
        inductor's Python wrapper). Dynamo keeps its guards on module attributes: the compiled code is shared by
        every model in the process, and without them a second model whose layers differ only in kind (another
        activation) ran the first one's graph. Each layer's function of the distance comes from its
        ``radial_table`` (rebuilt when weights change).
        """
        if hasattr(self, "_compiled"):
            return
        check_cpp_toolchain()
        self._compiled = torch.compile(self._one_pass, dynamic=False, options={"cpp_wrapper": True})
        self._compiled_slots: dict[tuple[int, int], int] = {}  # (atoms, table width) -> slots of the compiled graph
        self._radial: tuple[list, list[Tensor]] = ([], [])  # (the weights they were built from, radial tables)

    def _radial_tables(self) -> list[Tensor] | None:
        """Every edge embedding's ``radial_table`` for the current weights (new values, dtype or device rebuild),
        or None where they would hold more than ``RADIAL_TABLES_MAX_BYTES``."""
        layers = self.backbone.edge_embeddings()
        pieces = math.ceil(self.cfg.max_radius / layers[0].radial_step)
        dtype = layers[0].edge_attr_linear[0].weight.dtype
        if len(layers) * pieces * 4 * self.cfg.hidden_size * dtype.itemsize > RADIAL_TABLES_MAX_BYTES:
            return None
        key = [(p.data_ptr(), p._version, p.dtype) for layer in layers for p in layer.radial_parameters()]
        if key != self._radial[0]:
            self._radial = (key, [layer.radial_table(self.cfg) for layer in layers])
        return self._radial[1]

    def _compiled_inference(self, pos: Tensor, strain: Tensor | None, cell: Tensor, atomic_numbers: Tensor,
                            table: CandidateTable, n_sys: int) -> tuple[dict[str, Tensor], tuple[Tensor, ...]]:
        """``_eager``'s results through the compiled graph with the system's slots (``compile_inference``)."""
        system = (len(pos), table.width)
        slots = self._compiled_slots.get(system)
        if slots is not None:
            with torch._dynamo.config.patch(recompile_limit=COMPILED_SYSTEMS):
                out, grads = self._compiled(pos, strain, cell, atomic_numbers, table, n_sys, slots,
                                            self._radial_tables())
            if int(out["n_kept"].max()) <= slots:
                return out, grads
        out, grads = self._eager(pos, strain, cell, atomic_numbers, table, n_sys)
        need = int(out["n_kept"].max()) + SLOT_MARGIN
        self._compiled_slots[system] = max(slots or 0, min(need, self.cfg.knn_pad_size, table.width))
        return out, grads

    def _one_pass(self, pos: Tensor, strain: Tensor | None, cell: Tensor, atomic_numbers: Tensor,
                  table: CandidateTable, n_sys: int, slots: int,
                  radial: list[Tensor] | None) -> tuple[dict[str, Tensor], tuple[Tensor, ...]]:
        """``_eager`` for inference as one function of the inputs (``torch.func``), for ``torch.compile``."""
        if not self.gradient:
            return self._outputs(pos, cell, atomic_numbers, table, n_sys, slots, radial), ()
        argnums = (0,) if strain is None else (0, 1)
        grads, (_, out) = torch.func.grad_and_value(self._strained_energy, argnums, has_aux=True)(
            pos, strain, cell, atomic_numbers, table, n_sys, slots, radial)
        return out, grads

    def _eager(self, pos: Tensor, strain: Tensor | None, cell: Tensor, atomic_numbers: Tensor, table: CandidateTable,
               n_sys: int, create_graph: bool = False) -> tuple[dict[str, Tensor], tuple[Tensor, ...]]:
        """``_outputs`` and, for gradient models, the energy's gradients (positions, and ``strain`` if given)."""
        if not self.gradient:
            return self._outputs(pos, cell, atomic_numbers, table, n_sys), ()
        with torch.inference_mode(False), torch.enable_grad():
            # clones: tensors made under the caller's inference mode take no gradient
            pos = pos.clone().requires_grad_(True)
            strain = None if strain is None else strain.clone().requires_grad_(True)
            energy, out = self._strained_energy(pos, strain, cell.clone(), atomic_numbers, table, n_sys)
            inputs = [pos] if strain is None else [pos, strain]
            return out, torch.autograd.grad(energy, inputs, create_graph=create_graph)

    def _strained_energy(self, pos: Tensor, strain: Tensor | None, cell: Tensor, atomic_numbers: Tensor,
                         table: CandidateTable, n_sys: int, slots: int | None = None,
                         radial: list[Tensor] | None = None) -> tuple[Tensor, dict]:
        """(total energy, ``_outputs``) with positions and cell strained by the symmetric part of ``strain`` (G, 3, 3):
        a per-system displacement gradient at zero, whose gradient gives the stress."""
        if strain is not None:
            sym = 0.5 * (strain + strain.transpose(1, 2))
            pos = pos + torch.einsum("na,nab->nb", pos, sym[table.batch])
            cell = cell + cell @ sym
        out = self._outputs(pos, cell, atomic_numbers, table, n_sys, slots, radial)
        return out["energy"].sum(), out

    def _outputs(self, pos: Tensor, cell: Tensor, atomic_numbers: Tensor, table: CandidateTable, n_sys: int,
                 slots: int | None = None, radial: list[Tensor] | None = None) -> dict[str, Tensor]:
        """Raw energy (G,), direct forces (N, 3) if any, and ``n_kept`` (N,), the neighbours each atom keeps.
        ``slots=None`` sorts the atoms by the neighbours they keep and cuts each chunk of them to the slots it uses
        (``width_plan``; a host sync); an int keeps that many for every atom (static shapes). The caller checks
        ``n_kept`` (``check_slots``), outside any compiled region."""
        graph, n_kept = ranked_graph(pos, cell, table, self.cfg.graph, slots)
        hidden, batch, order = self.cfg.hidden_size, table.batch, None
        if slots is None:  # atoms sorted by the neighbours they keep; each chunk as wide as its widest
            order = torch.argsort(n_kept, descending=True, stable=True)
            plan = width_plan(n_kept[order].tolist(), hidden)
            if len({width for _, width in plan}) > 1:
                graph, atomic_numbers, batch = graph.reordered(order), atomic_numbers[order], batch[order]
            else:
                order = None
        else:
            plan = [(rows, slots) for rows in row_chunks(len(pos), slots, hidden)]
        parts = [geometry(part, self.cfg, radial) for part in graph.chunks(plan)]
        sizes = [rows for rows, _ in plan]
        chunks = [EdgeRows.of(part, sizes) for part in parts]
        atoms = AtomInputs(atomic_numbers, torch.cat([part.boo for part in parts]), radial)
        node, edges = self.backbone(atoms, chunks)
        out = {"energy": self._head("gradient" if self.gradient else "energy").energy(node, batch, n_sys),
               "n_kept": n_kept}
        if self.cfg.regress_forces and not self.gradient:
            forces = self._head("direct_forces").forces(node, edges, chunks)
            out["forces"] = forces if order is None else torch.zeros_like(forces).index_copy(0, order, forces)
        return out

    def forward(
        self,
        pos: Tensor,
        atomic_numbers: Tensor,
        cell: Tensor,
        pbc: Tensor,
        natoms: Tensor,
        *,
        stress: bool | None = None,
        create_graph: bool = False,
        table: CandidateTable | None = None,
        compiled: bool = False,
    ) -> dict[str, Tensor]:
        """``table``: the candidate table of these positions (``graph.nearest_candidates``), if already known.
        ``compiled``: inference through ``compile_inference``'s path (prepared on first use; training and
        ``create_graph`` stay eager), for MD of one system; other calls on this model stay eager."""
        dtype = next(self.parameters()).dtype
        pos, cell = pos.to(dtype), cell.to(dtype)
        n_sys = len(natoms)
        if table is None:
            table = candidate_table(pos, cell, pbc, natoms, self.cfg.graph)
        want_stress = self.gradient and (self.cfg.regress_stress if stress is None else stress)
        strain = torch.zeros(n_sys, 3, 3, dtype=dtype, device=pos.device) if want_stress else None
        if compiled and len(pos) and not (self.training or create_graph):
            self.compile_inference()
            out, grads = self._compiled_inference(pos, strain, cell, atomic_numbers, table, n_sys)
        else:
            out, grads = self._eager(pos, strain, cell, atomic_numbers, table, n_sys, create_graph or self.training)
        check_slots(out.pop("n_kept"), self.cfg.graph)
        if not self.gradient:
            return out
        out["forces"] = -grads[0]
        if want_stress:
            volume = torch.linalg.det(cell).abs()  # 0 for molecules: their stress is reported as 0
            out["stress"] = grads[1] / torch.where(volume > 0, volume, torch.ones_like(volume))[:, None, None]
        return out
