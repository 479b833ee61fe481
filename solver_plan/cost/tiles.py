"""Tiles: the box of a tensor each device of a configuration holds (or needs), as numpy arrays.

A box is an array (..., rank, 2) of half-open [lo, hi) index ranges per axis. A dimension of degree
k splits the axis it maps to into ranges [i*size//k, (i+1)*size//k); axes no split dimension maps
to are whole, so devices differing only in such dimensions hold the same box (replicas). The boxes
of one configuration are therefore either identical or disjoint, and together cover the tensor.
"""
from __future__ import annotations

from functools import lru_cache

import numpy as np

from solver_plan.cost.config import ParallelConfig

Shape = tuple[int, ...]


def tile_coordinates(cfg: ParallelConfig, names: tuple[str, ...]) -> np.ndarray:
    """(num_devices, len(names)) tile coordinate of each device position along each named dim."""
    degrees = [d for _, d in cfg.degrees]
    coords = np.array(np.unravel_index(np.arange(cfg.num_devices), degrees), dtype=np.int64).reshape(
        len(degrees), cfg.num_devices).T  # row-major, first dimension slowest, as ParallelConfig
    column = {name: i for i, (name, _) in enumerate(cfg.degrees)}
    out = np.zeros((cfg.num_devices, len(names)), dtype=np.int64)
    for j, name in enumerate(names):
        if name in column:
            out[:, j] = coords[:, column[name]]
    return out


@lru_cache(maxsize=200_000)
def tile_boxes(cfg: ParallelConfig, names: tuple[str, ...], axes: tuple, shape: Shape) -> np.ndarray:
    """(num_devices, rank, 2) box of a tensor held by each device position of `cfg`.

    `axes[j]` is the tensor axis dimension `names[j]` splits, or None."""
    coords = tile_coordinates(cfg, names)
    boxes = np.zeros((cfg.num_devices, len(shape), 2), dtype=np.int64)
    boxes[:, :, 1] = shape
    for j, axis in enumerate(axes):
        if axis is None:
            continue
        degree = cfg.degree(names[j])
        if degree > 1:
            size = shape[axis]
            boxes[:, axis, 0] = coords[:, j] * size // degree
            boxes[:, axis, 1] = (coords[:, j] + 1) * size // degree
    boxes.setflags(write=False)
    return boxes


def box_volume(boxes: np.ndarray) -> np.ndarray:
    """Number of elements of each box (over the last two axes)."""
    return np.prod(np.clip(boxes[..., 1] - boxes[..., 0], 0, None), axis=-1)


def overlap(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Number of elements in the (broadcast) intersection of two box arrays."""
    extent = np.minimum(a[..., 1], b[..., 1]) - np.maximum(a[..., 0], b[..., 0])
    return np.clip(extent, 0, None).prod(axis=-1)


def device_table(cfg: ParallelConfig, boxes: np.ndarray, num_devices: int) -> np.ndarray:
    """(num_devices, rank, 2): the box on each cluster device, an empty box where `cfg` is absent."""
    table = np.zeros((num_devices,) + boxes.shape[1:], dtype=np.int64)
    table[list(cfg.devices)] = boxes
    return table


def first_on_node(cfg: ParallelConfig, boxes: np.ndarray, num_devices: int, devices_per_node: int) -> np.ndarray:
    """(num_devices,) True on the first device of each node holding each distinct box of `cfg`,
    so summing over these devices counts every replicated box once per node. (One sort of the
    (node, box) rows, first occurrences kept by a stable sort: a Python loop over 3,072 devices took
    1.4 ms a configuration, 0.16 s of a 1 s limit on megatron-1T.)"""
    devices = np.asarray(cfg.devices, dtype=np.int64)
    keys = np.concatenate([(devices // devices_per_node)[:, None], boxes.reshape(len(devices), -1)], axis=1)
    order = np.lexsort(keys.T[::-1])  # stable: equal rows keep their positions' order
    ordered = keys[order]
    starts = np.ones(len(order), dtype=bool)
    starts[1:] = (ordered[1:] != ordered[:-1]).any(axis=1)
    mask = np.zeros(num_devices, dtype=bool)
    mask[devices[order[starts]]] = True
    return mask
