"""Memory floors computed when the hybrid search reaches a point (hybrid/floors.py): the search under a
binding limit bounds the memory of the points it prices, not of every point, and answers as a search
bounding every point first (brute force: tests/test_hybrid_brute.py)."""
import pytest

from solver_plan.cluster import resolve_cluster
from solver_plan.deadline import Deadline
from solver_plan.hybrid import floors, plan_hybrid, search
from solver_plan.hybrid.evaluate import memory_floor
from solver_plan.hybrid.model import transformer_spec
from solver_plan.result import Status

CLUSTER = resolve_cluster("h100-4x8-ib", 16)
SMALL = "gpt2:layers=4,hidden=512,heads=8,head_dim=64,ffn=2048,seq=512,positions=512,vocab=32000"


def _points_and_floors(limit):
    spec = transformer_spec(SMALL)
    ctx = search._context(spec, CLUSTER, 8, limit, search.resolve_hybrid_precision(None, CLUSTER), "torchtitan")
    points = search._runnable(ctx, search._points(spec, CLUSTER, 8, {}, Deadline(None)), {})
    return ctx, points, [memory_floor(ctx, p) for p in points]


def test_a_binding_search_bounds_only_the_points_it_reaches(monkeypatch):
    _, points, every = _points_and_floors(None)
    limit = sorted(every)[len(every) // 3]  # two thirds of the points over the limit by their floor
    counted = []

    def counting(ctx, par):
        counted.append(par)
        return memory_floor(ctx, par)

    monkeypatch.setattr(floors, "memory_floor", counting)
    result = plan_hybrid(SMALL, CLUSTER, 8, memory_limit=limit, time_limit=None, runtime="torchtitan")
    assert result.status == Status.OPTIMAL and result.plan.memory_per_device_bytes <= limit
    assert 0 < len(counted) < len(points) / 2 and len(set(counted)) == len(counted)  # each at most once
    # its plan is one of the points that fit by their floor (tests/test_hybrid_brute.py: the fastest)
    fitting = [p for p, f in zip(points, every) if f <= limit]
    assert result.plan.parallelism in fitting
    assert result.pruned + result.evaluated == len(points)


def test_any_fits_tries_the_likeliest_first_and_stops_on_the_budget():
    ctx, points, every = _points_and_floors(None)
    limit = sorted(every)[len(every) // 2]
    ctx, _, _ = _points_and_floors(limit)
    bounds = [search.state_bound(ctx, p) for p in points]
    lazy = floors.MemoryFloors(ctx, points, bounds, Deadline(None))
    indices = list(range(len(points)))
    assert lazy.any_fits(indices) is True and lazy.computed <= len(points)
    assert all(lazy.known[i] == pytest.approx(every[i]) or bounds[i] > limit for i in lazy.known)
    spent = floors.MemoryFloors(ctx, points, bounds, Deadline(1e-9))  # nothing left of the nominal budget
    assert spent.any_fits(indices) is None and spent.computed == 0
