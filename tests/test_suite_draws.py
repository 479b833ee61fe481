"""The generators' vectorised draws are the per-call loop's, bit for bit (suite/draws.py), and the
generated problems are the ones earlier sessions benchmarked: their digests were taken from the
generator of 9a5277e (a loop per node and per edge), before it was vectorised."""
from __future__ import annotations

import hashlib

import numpy as np
import pytest

from solver_plan.suite import generators, resolve_problem
from solver_plan.suite.draws import choices_without_replacement

# digests of 9a5277e's problems (computed with that commit's generators.py, not with this one)
BEFORE_VECTORISING = {
    "random-dag:nodes=10000,candidates=10-30,seed=1,memory=binding,devices=16": "be100db7fc7d7b5d",
    "random-dag:nodes=100,candidates=6-30,seed=1,memory=binding": "01855f0260ebb2fa",
    "series-parallel:nodes=500,candidates=2-62,seed=3,memory=infeasible,devices=16": "fbf45f2aa6264125",
    "skip-chain:nodes=300,candidates=2,seed=2,memory=none,devices=2": "a1bfc776e86e5f87",
    "random-dag:nodes=2000,candidates=2-126,seed=7,memory=binding,devices=64": "dffd4810f65150c8",
}


def digest(problem) -> str:
    h = hashlib.sha256()
    for array in problem.node_costs + problem.node_memory + problem.edge_costs:
        h.update(np.ascontiguousarray(array, dtype=np.float64).tobytes())
    h.update(repr((problem.edges, problem.node_devices, problem.memory_limit)).encode())
    return h.hexdigest()[:16]


@pytest.mark.parametrize("spec", sorted(BEFORE_VECTORISING))
def test_generated_problems_are_the_loops_to_the_bit(spec):
    assert digest(resolve_problem(spec)) == BEFORE_VECTORISING[spec]


def test_the_loop_route_gives_the_same_problem(monkeypatch):
    """Where a draw would be rejected the generator runs the loop itself: the same problem."""
    spec = "random-dag:nodes=100,candidates=6-30,seed=1,memory=binding"
    monkeypatch.setattr(generators, "choices_without_replacement", lambda rng, population, sizes: None)
    assert digest(resolve_problem(spec)) == BEFORE_VECTORISING[spec]


@pytest.mark.parametrize("population, low, high", [(61, 9, 29), (5, 1, 5), (61, 1, 61), (125, 1, 125), (1, 1, 1)])
@pytest.mark.parametrize("seed", range(6))
def test_choices_are_the_loops_and_leave_the_generator_as_it_would(population, low, high, seed):
    loop, vectorised = np.random.default_rng([seed, population]), np.random.default_rng([seed, population])
    for rng in (loop, vectorised):
        rng.integers(0, 3, size=seed % 2)  # an odd 32-bit draw first leaves a spare half in the state
    sizes = loop.integers(low, high + 1, size=300)
    vectorised.integers(low, high + 1, size=300)
    expected = [loop.choice(population, size=int(s), replace=False) for s in sizes]
    picks = choices_without_replacement(vectorised, population, sizes)
    assert picks is not None
    for row, size, values in zip(picks, sizes, expected):
        assert np.array_equal(row[:size], values) and (row[size:] == -1).all()
    state, again = loop.bit_generator.state, vectorised.bit_generator.state
    assert (state["state"], state["has_uint32"]) == (again["state"], again["has_uint32"])
    assert np.array_equal(loop.integers(0, 1000, size=7), vectorised.integers(0, 1000, size=7))
    assert np.array_equal(loop.random(3), vectorised.random(3))


def test_what_the_vectorised_route_cannot_follow_is_refused_untouched():
    rng = np.random.default_rng(1)
    before = rng.bit_generator.state
    assert choices_without_replacement(rng, 20_000, [3]) is None  # numpy's tail-shuffle route
    assert choices_without_replacement(np.random.Generator(np.random.MT19937(1)), 10, [3]) is None
    assert choices_without_replacement(rng, 10, [11]) is None
    assert rng.bit_generator.state == before


def test_a_draw_numpy_would_reject_sends_the_caller_to_the_loop():
    """Lemire's method rejects an output x where x * span mod 2^32 < (2^32 - span) mod span: an output
    of 0 with span 61 (top 60). Put it in the generator's spare 32-bit half, its next output."""
    rng = np.random.default_rng(3)
    rng.bit_generator.state = {**rng.bit_generator.state, "has_uint32": 1, "uinteger": 0}
    before = rng.bit_generator.state
    assert choices_without_replacement(rng, 61, [1]) is None and rng.bit_generator.state == before


def _random_dag_edges_by_loop(n, rng):
    edges = {(int(rng.integers(max(0, v - 4), v)), v) for v in range(1, n)}
    for _ in range(n // 2):
        v = int(rng.integers(1, n))
        edges.add((int(rng.integers(0, v)), v))
    return sorted(edges)


@pytest.mark.parametrize("n", [2, 3, 4, 5, 6, 17, 300, 4001])
def test_random_dag_edges_are_the_loops(n):
    for seed in range(12):
        loop, at_once = np.random.default_rng([seed, n]), np.random.default_rng([seed, n])
        expected = _random_dag_edges_by_loop(n, loop)
        edges = generators.random_dag_edges(n, at_once)
        assert edges == expected and all(type(u) is int and type(v) is int for u, v in edges)
        assert loop.bit_generator.state["state"] == at_once.bit_generator.state["state"]
        assert np.array_equal(loop.integers(0, 1000, size=5), at_once.integers(0, 1000, size=5))
