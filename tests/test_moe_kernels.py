"""Measured efficiency of the deduplicating dispatch kernels (hybrid/moe_kernels.py): its points
recomputed from the published kernel tables (data/device/published/deepep-normal-kernels.csv,
hybridep-kernels.csv) through the link model, the interpolation by hand, and the dispatchers priced
at it."""
from __future__ import annotations

import csv

import pytest

from solver_plan.cluster import resolve_cluster
from solver_plan.cost.routing import uniform
from solver_plan.data import data_dir
from solver_plan.hybrid import moe
from solver_plan.hybrid.moe import kernel_table_efficiency
from solver_plan.hybrid.moe_kernels import KERNEL_POINTS, kernel_efficiency
from test_moe import tiny

PUBLISHED = data_dir() / "device" / "published"


def rows(name: str) -> list[dict]:
    lines = [line for line in (PUBLISHED / name).read_text().splitlines() if not line.startswith("#")]
    return list(csv.DictReader(lines))


def deepep_points() -> dict[tuple[bool, int], float]:
    """(across nodes, units) -> mean of the dispatch's and the combine's efficiency on the H800 cluster."""
    cluster = resolve_cluster(str(data_dir() / "published/clusters/h800-deepseek-v3.yaml"), 64)
    found: dict[tuple[bool, int], list[float]] = {}
    for row in rows("deepep-normal-kernels.csv"):
        ep, nodes = int(row["ep"]), int(row["nodes"])
        found.setdefault((nodes > 1, nodes if nodes > 1 else ep), []).append(kernel_table_efficiency(
            cluster, ep, ep // nodes, int(row["tokens"]), int(row["hidden"]), 256, int(row["top_k"]),
            int(row["groups_per_token"]), float(row["element_bytes"]), float(row["bandwidth_gb_s"])))
    return {key: sum(v) / len(v) for key, v in found.items()}


def hybridep_points() -> dict[int, float]:
    """ranks -> mean of the BF16 dispatch's and the combine's efficiency, GB200, Python API, 32 SMs
    (what the published runs set)."""
    cluster = resolve_cluster("gb200-nvl72", 72)
    found = {}
    for row in rows("hybridep-kernels.csv"):
        if (row["platform"], row["measure"], row["sms"]) == ("GB200", "torch_api", "32"):
            ranks = int(row["ranks"])
            found[ranks] = sum(kernel_table_efficiency(cluster, ranks, ranks, 4096, 7168, 8 * ranks, 8, 1, 2.0,
                                                float(row[kind])) for kind in ("dispatch_bf16_gb_s", "combine_gb_s")) / 2
    return found


def test_points_are_the_published_tables():
    for (across, units), efficiency in deepep_points().items():
        assert dict(KERNEL_POINTS[("deepep", across)])[units] == pytest.approx(efficiency, abs=5e-4)
    points = hybridep_points()
    assert set(points) == {8, 16, 24, 32, 36}
    for ranks, efficiency in points.items():
        assert dict(KERNEL_POINTS[("hybridep", False)])[ranks] == pytest.approx(efficiency, abs=5e-4)


def test_a_table_point_by_hand():
    """HybridEP on 8 GB200s, 64 experts, top-8: a token reaches 8 (1 - C(56,8)/C(64,8)) = 5.30 of the
    8 ranks, so a rank receives 4096 x 5.30 tokens of 7168 x 2 bytes (the table's measure); the link
    model moves 7/8 of them (its own stay) at 900 GB/s x 0.65, plus 3.4 us; measured 550.10 GB/s."""
    from math import comb

    cluster = resolve_cluster("gb200-nvl72", 8)
    reached = 8 * (1 - comb(56, 8) / comb(64, 8))
    received = 4096 * reached * 7168 * 2
    priced = received * 7 / 8 / (900e9 * 0.65) + 3.4e-6
    assert kernel_table_efficiency(cluster, 8, 8, 4096, 7168, 64, 8, 1, 2.0, 550.10) == pytest.approx(
        priced / (received / 550.10e9))


def test_interpolation_by_hand():
    assert kernel_efficiency("hybridep", False, 8) == 0.840
    assert kernel_efficiency("hybridep", False, 28) == pytest.approx((0.816 + 0.789) / 2)
    assert kernel_efficiency("hybridep", False, 2) == 0.840  # below the first point: the first point
    assert kernel_efficiency("hybridep", False, 64) == KERNEL_POINTS[("hybridep", False)][-1][1]  # past the last
    assert kernel_efficiency("deepep", True, 3) == pytest.approx(
        (dict(KERNEL_POINTS[("deepep", True)])[2] + dict(KERNEL_POINTS[("deepep", True)])[4]) / 2)
    assert kernel_efficiency("hybridep", True, 4) == 1.0  # none published: the link model as it is
    assert kernel_efficiency("alltoall", False, 8) == 1.0


def test_dispatchers_priced_at_the_kernels_efficiency():
    """moe.alltoall_s = dedup_alltoall_s / kernel_efficiency for the deduplicating dispatchers, on the
    group's level and size (ep 4 inside a node of 8: 4 ranks; alltoall untouched)."""
    model, cluster = tiny(), resolve_cluster("h100-4x8-ib", 8)
    routing = moe.Routing(uniform(4))
    link = moe.dedup_alltoall_s(cluster, model, 1, 1, 4, 4, 2.0)
    for dispatcher in ("deepep", "hybridep"):
        assert moe.alltoall_s(cluster, model, 1, 1, 4, 1, routing, 2.0, dispatcher) == pytest.approx(
            link / kernel_efficiency(dispatcher, False, 4))
