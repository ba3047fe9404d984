"""EScAIP's neighbour graph: the bi-directional soft-kNN radius graph ("biknn"), found with a cell list.

The official builder ranks every pair of atoms (and periodic images) of a system: quadratic cost. Only pairs
closer than ``max_radius`` can be selected, and a soft rank only feels candidates within ``pi * knn_sigmoid_scale``,
so a cell list of the pairs within ``max_radius + pi * knn_sigmoid_scale`` feeds the very same ranking: identical
neighbours, linear cost. ``neighbor_search="all_pairs"`` keeps the official candidate set (the benchmark baseline,
and the only exact one for the full soft ranking).

Pipeline (per batch, vectorised over systems):
  1. search (no autograd, float64): candidate pairs (centre i, neighbour j, lattice image n);
  2. per centre row, keep the T = min(knn_k + 20, candidates in the official row) nearest: table (N, W);
  3. recompute the table's displacements differentiably from ``pos`` and ``cell`` (forces and stress flow
     through distances and soft ranks), rank, build the envelope value e, keep e < 1, sort by e, pad to K.
Steps 1-2 are ``candidate_table`` (data-dependent shapes; with a skin, reusable across MD steps through
``nearest_candidates``), step 3 is ``ranked_graph`` (static shapes, no host syncs: it compiles).
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass

import torch
from torch import Tensor

__all__ = ["GraphConfig", "NeighborGraph", "CandidateTable", "SkinCandidates", "build_graph", "candidate_table",
           "nearest_candidates", "ranked_graph", "check_slots", "batch_index", "safe_norm"]

ZERO_SQ = 1e-12  # |disp|^2 at or below this counts as distance 0 (the self-loop)
SEARCH_MARGIN = 1e-3  # Å added to the search radius so float rounding never drops a candidate
MAX_EXTENT = 1e5  # Å; larger coordinate spans are almost certainly unit mistakes


@dataclass(frozen=True)
class GraphConfig:
    max_radius: float = 6.0
    knn_k: int = 30
    knn_pad_size: int = 45
    knn_soft: bool = True
    knn_sigmoid_scale: float = 0.2
    knn_lse_scale: float = 0.1
    knn_use_low_mem: bool = True
    use_pbc: bool = True
    neighbor_search: str = "cell_list"  # or "all_pairs" (the official candidate set)

    def __post_init__(self) -> None:
        if self.neighbor_search not in ("cell_list", "all_pairs"):
            raise ValueError(f"neighbor_search must be 'cell_list' or 'all_pairs', got {self.neighbor_search!r}")
        if self.knn_k < 1 or self.knn_pad_size < 1 or self.max_radius <= 0:
            raise ValueError("knn_k, knn_pad_size and max_radius must be positive")

    @property
    def exact_all_pairs(self) -> bool:
        # the full soft ranking sums a sigmoid over *every* candidate: only the complete candidate set is exact
        return self.neighbor_search == "all_pairs" or (self.knn_soft and not self.knn_use_low_mem)

    @property
    def search_radius(self) -> float:
        if self.knn_soft and self.knn_use_low_mem:
            return self.max_radius + math.pi * self.knn_sigmoid_scale + SEARCH_MARGIN
        return self.max_radius + SEARCH_MARGIN


@dataclass
class NeighborGraph:
    """Dense neighbour table; slot 0 of every row is the self-loop."""

    index: Tensor  # (N, K) global index of the neighbour atom j; 0 in padded slots
    mask: Tensor  # (N, K) bool, True for real slots
    disp: Tensor  # (N, K, 3) pos_j + image shift - pos_i (centre -> neighbour); 0 in padded slots
    env: Tensor  # (N, K) envelope value e in [0, 1); +inf in padded slots
    image: Tensor  # (N, K, 3) integer lattice image of j, relative to positions wrapped into the cell

    def reordered(self, order: Tensor) -> "NeighborGraph":
        """The same graph with atom ``order[i]`` as atom i: rows reordered and neighbour indices renumbered."""
        new_id = torch.empty_like(order)
        new_id[order] = torch.arange(len(order), device=order.device)
        return NeighborGraph(new_id[self.index[order]], self.mask[order], self.disp[order], self.env[order],
                             self.image[order])

    def chunks(self, plan: list[tuple[int, int]]) -> list["NeighborGraph"]:
        """Consecutive rows cut into chunks of (rows, slots) each, every chunk cut to its own slots (which must hold
        all of its rows' real slots)."""
        rows = [n for n, _ in plan]
        fields = [t.split(rows) for t in (self.index, self.mask, self.disp, self.env, self.image)]
        return [NeighborGraph(*(f[c][:, :width] for f in fields)) for c, (_, width) in enumerate(plan)]


# ----------------------------------------------------------------------------- helpers
def batch_index(natoms: Tensor) -> Tensor:
    """(G,) atom counts -> (N,) system index of every atom."""
    return torch.repeat_interleave(torch.arange(len(natoms), device=natoms.device), natoms)


def safe_norm(vec: Tensor) -> Tensor:
    """|vec| over the last dim, exactly 0 (with zero gradient) where |vec|^2 <= 1e-12."""
    sq = (vec * vec).sum(-1)
    nonzero = sq > ZERO_SQ
    return torch.where(nonzero, torch.where(nonzero, sq, torch.ones_like(sq)).sqrt(), torch.zeros_like(sq))


def _segment_offsets(counts: Tensor) -> Tensor:
    return torch.cumsum(counts, 0) - counts


def _expand_ranges(counts: Tensor) -> tuple[Tensor, Tensor]:
    """For ranges of the given lengths: (range id, position inside the range) of every element."""
    owner = batch_index(counts)
    within = torch.arange(len(owner), device=counts.device) - _segment_offsets(counts)[owner]
    return owner, within


def _image_reps(cell: Tensor, periodic: Tensor, radius: float) -> Tensor:
    """(G, 3) image ranges: rep_k = ceil(r * |a_{k+1} x a_{k+2}| / V) along periodic directions, else 0."""
    a1, a2, a3 = cell[:, 0], cell[:, 1], cell[:, 2]
    volume = torch.linalg.det(cell).abs()
    cross = torch.stack([torch.linalg.cross(a2, a3), torch.linalg.cross(a3, a1), torch.linalg.cross(a1, a2)], 1)
    reps = torch.ceil(radius * cross.norm(dim=-1) / volume.clamp_min(1e-300)[:, None]).long()
    return torch.where(periodic, reps, torch.zeros_like(reps))


# ----------------------------------------------------------------------------- search (no autograd)
@torch.no_grad()
def _search(pos: Tensor, cell: Tensor, periodic: Tensor, natoms: Tensor, cfg: GraphConfig, skin: float = 0.0):
    """Candidate pairs of every system, in float64, within the search radius plus ``skin``.

    Returns (centre, neighbour, image, dist, wrap_shift, row_limit): image is relative to the wrapped
    positions, wrap_shift (N, 3) the lattice vectors each atom was moved by, and row_limit (N,) the number of
    candidates the official row holds (n_atoms * n_images of the system).
    """
    device = pos.device
    pos, cell = pos.double(), cell.double()
    batch = batch_index(natoms)
    n_sys = len(natoms)

    # wrap periodic directions into the cell (what fairchem's AtomicData.from_ase does)
    any_periodic = periodic.any(1)
    safe_cell = torch.where(any_periodic[:, None, None], cell, torch.eye(3, dtype=cell.dtype, device=device))
    if any_periodic.any():
        det = torch.linalg.det(cell[any_periodic]).abs()
        if (det < 1e-8).any():
            bad = torch.nonzero(any_periodic).flatten()[torch.nonzero(det < 1e-8).flatten()[0]].item()
            raise ValueError(f"system {bad} is periodic but its cell has (near) zero volume; give a full 3x3 cell "
                             "(vacuum along non-periodic directions is fine) or set pbc=False")
    frac = torch.linalg.solve(safe_cell[batch].transpose(1, 2), pos.unsqueeze(-1)).squeeze(-1)
    wrap_shift = torch.where(periodic[batch], torch.floor(frac), torch.zeros_like(frac))
    pos_w = pos - torch.einsum("na,nab->nb", wrap_shift, cell[batch])

    reps = _image_reps(safe_cell, periodic, cfg.max_radius)  # (G, 3) from the cutoff, as the official code
    widths = 2 * reps + 1
    n_images = widths.prod(1)  # (G,)
    row_limit = (natoms * n_images)[batch]  # (N,)

    # every (atom, image) pair of the official enumeration, first image index slowest
    img_atom, local = _expand_ranges(n_images[batch])
    w = widths[batch[img_atom]]
    r = reps[batch[img_atom]]
    n3 = local % w[:, 2] - r[:, 2]
    t = local // w[:, 2]
    n2 = t % w[:, 1] - r[:, 1]
    n1 = t // w[:, 1] - r[:, 0]
    img_n = torch.stack([n1, n2, n3], 1)  # (M, 3)
    img_pos = pos_w[img_atom] + torch.einsum("ma,mab->mb", img_n.double(), cell[batch[img_atom]])

    radius = cfg.search_radius + skin
    if cfg.exact_all_pairs:
        # the official candidate set: every atom against every (atom, image) of its system
        first_img = _segment_offsets(torch.bincount(batch[img_atom], minlength=n_sys))
        centre, within = _expand_ranges(row_limit)
        cand = first_img[batch[centre]] + within
    else:
        rows = batch[:, None].expand(-1, 3)
        lo = torch.full((n_sys, 3), math.inf, dtype=pos.dtype, device=device).scatter_reduce(0, rows, pos_w, "amin")
        hi = torch.full((n_sys, 3), -math.inf, dtype=pos.dtype, device=device).scatter_reduce(0, rows, pos_w, "amax")
        if ((hi - lo) > MAX_EXTENT).any():
            raise ValueError(f"atom coordinates span more than {MAX_EXTENT:g} Å; positions must be in Å")
        # image atoms farther than the search radius from a system's bounding box cannot be neighbours
        g_img = batch[img_atom]
        inside = ((img_pos >= lo[g_img] - radius) & (img_pos <= hi[g_img] + radius)).all(1)
        keep = torch.nonzero(inside).flatten()
        # cubic bins of side `radius` over the box grown by one bin: centres never touch the grid edge
        origin = lo - radius
        dims = torch.floor((hi - lo + 2 * radius) / radius).long() + 1  # (G, 3)
        offset = _segment_offsets(dims.prod(1))

        def key(p: Tensor, g: Tensor, delta: Tensor) -> Tensor:
            """(len(p), len(delta)) keys of the bins ``delta`` away from each point's bin."""
            b = torch.floor((p - origin[g]) / radius).long()[:, None, :] + delta
            d = dims[g][:, None, :]
            return offset[g][:, None] + (b[..., 0] * d[..., 1] + b[..., 1]) * d[..., 2] + b[..., 2]

        steps = torch.tensor([-1, 0, 1], device=device)
        delta = torch.cartesian_prod(steps, steps, steps)  # (27, 3)
        sorted_keys, order = torch.sort(key(img_pos[keep], g_img[keep], delta.new_zeros(1, 3)).flatten())
        bins, counts = torch.unique_consecutive(sorted_keys, return_counts=True)
        starts = _segment_offsets(counts)
        near = key(pos_w, batch, delta).flatten()  # (N * 27,)
        slot = torch.searchsorted(bins, near).clamp_max(len(bins) - 1)
        found = bins[slot] == near
        n_in = torch.where(found, counts[slot], torch.zeros_like(slot))
        row, within = _expand_ranges(n_in)
        centre = row // 27
        cand = keep[order[starts[slot[row]] + within]]

    nbr = img_atom[cand]
    image = img_n[cand]
    dist = (img_pos[cand] - pos_w[centre]).norm(dim=-1)
    if not cfg.exact_all_pairs:
        close = dist <= radius
        centre, nbr, image, dist = centre[close], nbr[close], image[close], dist[close]

    overlap = (dist * dist <= ZERO_SQ) & ~((nbr == centre) & (image == 0).all(1))
    if overlap.any():
        k = torch.nonzero(overlap).flatten()[0]
        i, j = centre[k].item(), nbr[k].item()
        g = batch[i].item()
        first = _segment_offsets(natoms)[g].item()
        where = "the same position" + ("" if (image[k] == 0).all() else f" (periodic image {image[k].tolist()})")
        raise ValueError(f"atoms {i - first} and {j - first} of system {g} sit at {where}: distance 0. "
                         "Remove duplicate atoms (e.g. ase.geometry.get_duplicate_atoms(atoms, delete=True))")
    return centre, nbr, image, dist, wrap_shift.long(), row_limit


def _ranked_table(centre, nbr, image, dist, row_limit, n_atoms: int, cfg: GraphConfig, truncate: bool = True):
    """Per centre row, its T nearest candidates (all of them unless ``truncate``) sorted by distance: (N, W)
    neighbour, (N, W, 3) image, (N, W) valid, (N,) T."""
    # all but the full soft ranking keep T = min(k + 20, row size); hard ranks >= k are never selected
    limit = row_limit if cfg.knn_soft and not cfg.knn_use_low_mem else row_limit.clamp_max(cfg.knn_k + 20)
    order = torch.argsort(dist, stable=True)
    order = order[torch.argsort(centre[order], stable=True)]
    centre, nbr, image = centre[order], nbr[order], image[order]
    counts = torch.bincount(centre, minlength=n_atoms)
    rank = torch.arange(len(centre), device=centre.device) - _segment_offsets(counts)[centre]
    keep = rank < (limit if truncate else row_limit)[centre]
    centre, nbr, image, rank = centre[keep], nbr[keep], image[keep], rank[keep]
    width = int(rank.max().item()) + 1 if len(rank) else 1
    table_nbr = torch.zeros(n_atoms, width, dtype=torch.long, device=centre.device)
    table_img = torch.zeros(n_atoms, width, 3, dtype=torch.long, device=centre.device)
    valid = torch.zeros(n_atoms, width, dtype=torch.bool, device=centre.device)
    table_nbr[centre, rank] = nbr
    table_img[centre, rank] = image
    valid[centre, rank] = True
    return table_nbr, table_img, valid, limit


# ----------------------------------------------------------------------------- ranking (differentiable)
def _step(x: Tensor) -> Tensor:
    """The low-memory soft step: 1/2 + sin(x/2)/2 inside |x| < pi, a hard 0/1 step outside."""
    inside = x.abs() < math.pi
    smooth = 0.5 + 0.5 * torch.sin(torch.where(inside, x, torch.zeros_like(x)) / 2)
    return torch.where(inside, smooth, 0.5 + 0.5 * torch.sign(x))


@dataclass
class CandidateTable:
    """Per centre row, its T nearest candidates sorted by distance: what ``build_graph`` ranks. Found without
    autograd and with data-dependent shapes; everything after it has static shapes (N, W) for a given table."""

    nbr: Tensor  # (N, W) neighbour atom
    image: Tensor  # (N, W, 3) lattice image of the neighbour, relative to positions wrapped into the cell
    valid: Tensor  # (N, W) bool
    limit: Tensor  # (N,) T of the row
    shift: Tensor  # (N, W, 3) lattice vectors from pos_j - pos_i to the displacement (wrapping folded in)
    batch: Tensor  # (N,) system of every atom

    @functools.cached_property
    def width(self) -> int:
        """The columns of a table of T nearest: the largest T (one host sync per table; fixed for a system)."""
        return int(self.limit.max()) if len(self.limit) else 1


def candidate_table(pos: Tensor, cell: Tensor, pbc: Tensor, natoms: Tensor, cfg: GraphConfig,
                    skin: float = 0.0) -> CandidateTable:
    """``pbc`` (G, 3) selects the periodic directions of each system (all off when ``cfg.use_pbc`` is False).

    With a ``skin`` (Å), every candidate within the search radius plus the skin is kept, not only the T nearest:
    ``nearest_candidates`` then gives the table of any positions where no atom moved more than half the skin.
    """
    n_atoms = pos.shape[0]
    periodic = pbc.bool() & cfg.use_pbc
    centre, nbr, image, dist, wrap_shift, row_limit = _search(pos.detach(), cell.detach(), periodic, natoms, cfg, skin)
    table_nbr, table_img, valid, limit = _ranked_table(centre, nbr, image, dist, row_limit, n_atoms, cfg,
                                                       truncate=not skin)
    rows = torch.arange(n_atoms, device=pos.device)[:, None]
    shift = table_img - wrap_shift[table_nbr] + wrap_shift[rows]  # pos_w = pos - wrap_shift @ cell
    return CandidateTable(table_nbr, table_img, valid, limit, shift, batch_index(natoms))


@torch.no_grad()
def nearest_candidates(pos: Tensor, cell: Tensor, table: CandidateTable, cfg: GraphConfig) -> CandidateTable:
    """The table ``candidate_table`` finds at ``pos``, from one built with a skin where no atom has moved more than
    half the skin since (each pair's distance changed by less than the skin): the candidates within the search
    radius, per row the T nearest, sorted by distance. Tied distances may come in another order (the graph is the
    same up to float rounding). Its width is the largest T whatever the skin table holds, a fixed shape for a given
    system, so a compiled model sees one shape across rebuilds of the skin table."""
    disp = pos.double()[table.nbr] - pos.double()[:, None] + torch.einsum(
        "nwa,nab->nwb", table.shift.double(), cell.double()[table.batch])
    sq = (disp * disp).sum(-1)
    key = torch.where(table.valid & (sq <= cfg.search_radius**2), sq, math.inf)
    if key.shape[1] < table.width:  # the width of the system, whatever the skin table holds: no new shapes
        key = torch.cat([key, key.new_full((len(key), table.width - key.shape[1]), math.inf)], 1)
    order = torch.argsort(key, dim=1, stable=True)[:, :table.width]
    valid = torch.isfinite(key.gather(1, order)) & (torch.arange(table.width, device=pos.device) < table.limit[:, None])
    order = torch.where(valid, order, 0)  # padded columns point at column 0, masked
    order3 = order[..., None].expand(-1, -1, 3)
    return CandidateTable(torch.where(valid, table.nbr.gather(1, order), 0),
                          torch.where(valid[..., None], table.image.gather(1, order3), 0), valid, table.limit,
                          torch.where(valid[..., None], table.shift.gather(1, order3), 0), table.batch)


class SkinCandidates:
    """The candidate tables of successive calls on the same systems (MD, relaxations), as ASE's ``NeighborList``
    keeps its lists: found once within the search radius plus ``skin`` (Å), a table serves (``nearest_candidates``)
    until an atom has moved more than half the skin, with the same graph as a fresh search. The skin table is built
    on the second call on the same systems (a new structure each call, as in a loop over an ensemble, gains nothing
    from it), or on the first with ``first_call=True`` (a compiled model: one table width, so one shape, per system).
    """

    def __init__(self, cfg: GraphConfig, skin: float = 0.5, first_call: bool = False):
        self.cfg, self.skin, self.first_call = cfg, skin, first_call
        self._last = None  # (skin table or None, the positions it was built at, cell, pbc, atomic numbers)

    def __call__(self, batch: dict[str, Tensor]) -> CandidateTable:
        """The table of a batch (``pos``, ``cell``, ``pbc``, ``atomic_numbers``, ``natoms``)."""
        pos, cell, pbc, natoms = batch["pos"].detach(), batch["cell"], batch["pbc"], batch["natoms"]
        system = (cell, pbc, batch["atomic_numbers"])
        last = self._last
        same = last is not None and all(torch.equal(a, b) for a, b in zip(system, last[2:]))
        if same and last[0] is not None and float((pos - last[1]).norm(dim=1).max()) < self.skin / 2:
            return nearest_candidates(pos, cell, last[0], self.cfg)
        build = self.skin > 0 and (same or self.first_call)
        table = candidate_table(pos, cell, pbc, natoms, self.cfg, self.skin) if build else None
        # copies: a caller may move its atoms in the tensors it passed
        self._last = (table, *(t.clone() for t in (pos, *system)))
        if table is None:
            return candidate_table(pos, cell, pbc, natoms, self.cfg)
        return nearest_candidates(pos, cell, table, self.cfg)


def build_graph(pos: Tensor, cell: Tensor, pbc: Tensor, natoms: Tensor, cfg: GraphConfig) -> NeighborGraph:
    """The bi-kNN graph of a batch. Differentiable w.r.t. ``pos`` (N, 3) and ``cell`` (G, 3, 3)."""
    graph, n_kept = ranked_graph(pos, cell, candidate_table(pos, cell, pbc, natoms, cfg), cfg)
    check_slots(n_kept, cfg)
    return graph


def check_slots(n_kept: Tensor, cfg: GraphConfig) -> None:
    """One clear error where an atom keeps more neighbours than ``knn_pad_size`` slots hold."""
    if len(n_kept) and n_kept.max() > cfg.knn_pad_size:
        worst = int(n_kept.argmax())
        raise ValueError(f"atom {worst} keeps {int(n_kept[worst])} neighbours (self-loop included) but knn_pad_size is "
                         f"{cfg.knn_pad_size}; the soft kNN can keep more than knn_k={cfg.knn_k}: raise knn_pad_size")


def ranked_graph(pos: Tensor, cell: Tensor, table: CandidateTable, cfg: GraphConfig,
                 slots: int | None = None) -> tuple[NeighborGraph, Tensor]:
    """The graph of a candidate table, with ``slots`` (default ``knn_pad_size``) slots per atom, and (N,) the
    number of neighbours each atom keeps (``check_slots``). No host syncs and static shapes, so it compiles."""
    table_nbr, valid, limit = table.nbr, table.valid, table.limit
    n_atoms = pos.shape[0]
    disp = pos[table_nbr] - pos[:, None, :] + torch.einsum("nwa,nab->nwb", table.shift.to(pos.dtype),
                                                           cell[table.batch])  # (N, W, 3)
    disp = torch.where(valid[..., None], disp, torch.zeros_like(disp))
    dist = safe_norm(disp)  # (N, W)

    k = float(cfg.knn_k)
    # where each candidate's value falls among the T values of its neighbour's row (= column j's values)
    dist_j = dist[table_nbr]  # (N, W, W)
    valid_j = valid[table_nbr]
    # (its largest table value, not the one at position T-1: rounding may reorder near-ties)
    largest = torch.where(valid, dist.detach(), torch.full_like(dist, -math.inf)).amax(1)
    last_j = torch.where(valid.sum(1) >= limit, largest, torch.full_like(largest, math.inf))
    member_dst = valid & (dist.detach() <= last_j[table_nbr])
    if cfg.knn_soft:
        scale = cfg.knn_sigmoid_scale
        soft = _step if cfg.knn_use_low_mem else torch.sigmoid
        r_src = (soft((dist[:, :, None] - dist[:, None, :]) / scale) * valid[:, None, :]).sum(-1)
        r_dst = (soft((dist[:, :, None] - dist_j) / scale) * valid_j).sum(-1)
        lam = cfg.knn_lse_scale
        r_dst_safe = torch.where(member_dst, r_dst, torch.zeros_like(r_dst))
        stacked = torch.stack([r_src / k, r_dst_safe / k, dist / cfg.max_radius], -1) / lam
        env = lam * torch.logsumexp(stacked, -1)
    else:
        r_src = torch.arange(dist.shape[1], device=pos.device, dtype=pos.dtype).expand_as(dist)
        r_dst = ((dist_j.detach() < dist.detach()[:, :, None]) & valid_j).sum(-1).to(pos.dtype)
        env = torch.maximum(torch.maximum(r_src / k, r_dst / k), dist / cfg.max_radius)
    usable = valid & member_dst
    env = torch.where(usable, env, torch.full_like(env, math.inf))
    env = torch.where(usable & (dist == 0), torch.zeros_like(env), env)

    # keep e < 1, slots ordered by e (the self-loop, e = 0, first)
    kept = env.detach() < 1
    n_kept = kept.sum(1)
    slots = cfg.knn_pad_size if slots is None else slots
    order = torch.argsort(torch.where(kept, env.detach(), torch.full_like(env, math.inf)), dim=1, stable=True)
    if order.shape[1] < slots:
        order = torch.cat([order, order.new_zeros(n_atoms, slots - order.shape[1])], 1)
    order = order[:, :slots]
    mask = torch.arange(slots, device=pos.device) < n_kept[:, None]  # (N, K)
    sel_env = env.gather(1, order)
    sel_disp = disp.gather(1, order[..., None].expand(-1, -1, 3))
    return NeighborGraph(
        index=torch.where(mask, table_nbr.gather(1, order), torch.zeros_like(order)),
        mask=mask,
        disp=torch.where(mask[..., None], sel_disp, torch.zeros_like(sel_disp)),
        env=torch.where(mask, sel_env, torch.full_like(sel_env, math.inf)),
        image=torch.where(mask[..., None], table.image.gather(1, order[..., None].expand(-1, -1, 3)), 0),
    ), n_kept
