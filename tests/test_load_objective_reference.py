"""The load objective's array code (intra/load_objective.py: the edge split a shape of matrices at a
time, a breakdown by gathers and bincounts) against the loops it replaced, kept here as the slow
reference: the same bits, not merely close (the validator recomputes what a planner reports)."""
import numpy as np
import pytest

from solver_plan.intra import load_objective
from solver_plan.intra.load_objective import load_breakdown, split_edges, sync_owners, sync_parts, topological_order
from solver_plan.intra.load_search import _LoadState
from solver_plan.intra.random_instances import random_problem
from solver_plan.intra.solve import solve


def _reference_split(problem):
    """The loop over edges: M = a[k] + b[l] + R[k, l], each candidate charged its edges' parts in edge order."""
    sync = sync_parts(problem)
    device_time = [np.asarray(c, dtype=float) - s for c, s in zip(problem.node_costs, sync)]
    charged = [t.copy() for t in device_time]
    rows, columns, residuals = [], [], []
    for (u, v), matrix in zip(problem.edges, problem.edge_costs):
        row_min = matrix.min(axis=1)
        column_min = (matrix - row_min[:, None]).min(axis=0)
        residual = matrix - row_min[:, None] - column_min[None, :]
        charged[u] += row_min
        charged[v] += column_min
        rows.append(row_min)
        columns.append(column_min)
        residuals.append(residual if residual.max() > 0 else None)
    moved = [c - t for c, t in zip(charged, device_time)]
    return dict(charged=charged, moved=moved, row_part=rows, column_part=columns, residual=residuals,
                sync=list(sync), device_time=device_time)


def _reference_device_tail(problem, plan, split, reference):
    """max over tail nodes v and devices d of v of: the device time on d of v and its descendants
    (summed in node order) + v's sync."""
    work = np.zeros((problem.num_nodes, problem.num_devices))
    for node, choice in enumerate(plan):
        work[node, list(problem.node_devices[node][choice])] = reference["device_time"][node][choice]
    best = 0.0
    for v, mask in split.tails:
        on = work[mask].sum(axis=0)
        own = list(problem.node_devices[v][plan[v]])
        if own:
            best = max(best, float(on[own].max()) + float(reference["sync"][v][plan[v]]))
    return best


def _reference_breakdown(problem, plan, reference):
    """(busy, moved, links, critical path, sync tail, sum) by loops over nodes and edges, each
    device's amounts added in node order, then edge order."""
    busy, moved, links = (np.zeros(problem.num_devices) for _ in range(3))
    owners = sync_owners(problem)
    for node, choice in enumerate(plan):
        for device in problem.node_devices[node][choice]:
            busy[device] += reference["device_time"][node][choice]
            moved[device] += reference["moved"][node][choice]
        on = problem.node_devices[node][choice] if owners is None else owners[node][choice]
        for device in on:
            links[device] += reference["sync"][node][choice]
    for (u, v), residual in zip(problem.edges, reference["residual"]):
        if residual is not None and residual[plan[u], plan[v]]:
            for device in set(problem.node_devices[u][plan[u]]) | set(problem.node_devices[v][plan[v]]):
                moved[device] += residual[plan[u], plan[v]]
    tail = np.zeros(problem.num_nodes)
    for u in reversed(topological_order(problem)):
        after = 0.0
        for j, (a, v) in enumerate(problem.edges):
            if a == u:
                after = max(after, float(problem.edge_costs[j][plan[u], plan[v]]) + tail[v])
        tail[u] = float(reference["device_time"][u][plan[u]]) + after
    sync = np.array([reference["sync"][node][choice] for node, choice in enumerate(plan)])
    return busy, moved, links, float(tail.max()), float((tail + sync).max()), problem.objective(plan)


def _problems():
    from solver_plan.cluster import resolve_cluster
    from solver_plan.graph.resolve import resolve_model
    from solver_plan.planning import prepare_problem
    from solver_plan.suite.generators import resolve_problem
    yield random_problem(30, seed=1, shape="dag", num_devices=8)
    yield random_problem(60, seed=2, shape="series_parallel", min_candidates=1, max_candidates=9, num_devices=16,
                         zero_diagonal=False)
    yield random_problem(40, seed=3, shape="chain", num_devices=4, memory_tightness=0.7)
    yield resolve_problem("random-dag:nodes=300,candidates=3-12,seed=4,devices=16")
    # gradient sync in the context: every device syncs (ring) / owners sync after the backward pass
    yield prepare_problem(resolve_model("mlp:layers=3,hidden=512,batch=64"), resolve_cluster("v100x8-nvlink", 2),
                          None)[0]
    yield prepare_problem(resolve_model("inception_v3:batch=8,image=75"), resolve_cluster("p100-4x4", 4), None,
                          max_candidates=8)[0]


@pytest.mark.parametrize("cells", [load_objective.UNION_CELLS, 64])  # 64: the unions' masks a few edges at a time
@pytest.mark.parametrize("problem", list(_problems()), ids=lambda p: p.name)
def test_split_and_breakdown_are_the_loops_bit_for_bit(problem, cells, monkeypatch):
    monkeypatch.setattr(load_objective, "UNION_CELLS", cells)
    split = split_edges(problem)
    reference = _reference_split(problem)
    for field, expected in reference.items():
        got = getattr(split, field)
        assert len(got) == len(expected), field
        for mine, theirs in zip(got, expected):
            assert (mine is None) == (theirs is None), field
            assert mine is None or np.array_equal(mine, theirs), field
    rng = np.random.default_rng(0)
    plans = [tuple(int(rng.integers(len(c))) for c in problem.node_costs) for _ in range(5)]
    plans.append(tuple(solve(problem, "greedy").assignment))
    for plan in plans:
        for j, (u, v) in enumerate(problem.edges):
            residual = reference["residual"][j]
            assert split.residual_at(j, plan[u], plan[v]) == (0.0 if residual is None else residual[plan[u], plan[v]])
        parts = load_breakdown(problem, plan, split)
        busy, moved, links, critical, sync_tail, total = _reference_breakdown(problem, plan, reference)
        assert np.array_equal(parts.device_busy, busy) and np.array_equal(parts.moved, moved)
        assert np.array_equal(parts.link_busy, links)
        assert (parts.critical_path, parts.sync_tail, parts.total) == (critical, sync_tail, total)
        assert parts.device_tail == _reference_device_tail(problem, plan, split, reference)
        # local search starts from the same vectors and value
        state = _LoadState(problem, split, plan)
        assert np.array_equal(state.busy, busy) and np.array_equal(state.moved, moved)
        assert state.value == state._value(state.busy, state.moved, state.plan) == parts.objective
