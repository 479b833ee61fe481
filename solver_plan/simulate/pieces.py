"""Tensor pieces that must move between two configurations of one tensor.

Holders each keep a box of the tensor (boxes of one configuration are identical or disjoint, so the
distinct boxes partition the tensor); receivers each need a box. A receiver needs one piece from
every distinct held box its own box overlaps. When its own device keeps that box, the piece is
already local (a plain dependency); otherwise it comes from a replica of that box: one on the
receiver's node if any, else any, picked round-robin by receiver position so replicas share the load
(the same nearest-replica rule as the cost model's redistribution).
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from solver_plan.cluster import Cluster
from solver_plan.cost.config import ParallelConfig
from solver_plan.cost.tiles import overlap


@dataclass(frozen=True)
class Exchange:
    """What receivers need from holders. Positions index the configurations' device lists."""
    local: tuple[tuple[int, int], ...]  # (holder position, receiver position) on one device
    moves: tuple[tuple[int, int, int], ...]  # (holder position, receiver position, elements)


def exchange(cluster: Cluster, hold_cfg: ParallelConfig, hold_boxes: np.ndarray,
             recv_cfg: ParallelConfig, recv_boxes: np.ndarray) -> Exchange:
    """The pieces each receiver of `recv_cfg` needs from the holders of `hold_cfg`: local ones, and moves
    from the nearest replica, round-robin (see the module text)."""
    flat = hold_boxes.reshape(len(hold_boxes), -1)
    unique, which = np.unique(flat, axis=0, return_inverse=True)
    which = np.ravel(which)
    unique = unique.reshape(-1, hold_boxes.shape[1], 2)
    shared = overlap(recv_boxes[:, None], unique[None])  # (receivers, distinct boxes)
    holders: list[list[int]] = [[] for _ in range(len(unique))]
    for position, box in enumerate(which):
        holders[box].append(position)
    hold_position = {device: position for position, device in enumerate(hold_cfg.devices)}
    local, moves = [], []
    for r, device in enumerate(recv_cfg.devices):
        mine = hold_position.get(device)
        for box in np.flatnonzero(shared[r]):
            if mine is not None and which[mine] == box:
                local.append((mine, r))
                continue
            node = cluster.node_of(device)
            near = [h for h in holders[box] if cluster.node_of(hold_cfg.devices[h]) == node] or holders[box]
            moves.append((near[r % len(near)], r, int(shared[r, box])))
    return Exchange(tuple(local), tuple(moves))
