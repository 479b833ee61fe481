"""memory_repair: a repaired plan always fits memory, and the repair does not swing memory between
devices (its total excess over the limit falls over every round that needs no fallback)."""
from __future__ import annotations

import itertools

import numpy as np
import pytest

from intra_cases import tiny_cases
from solver_plan.intra import memory_repair
from solver_plan.intra.memory_repair import FINE_ROUNDS, repair_memory


def _binding_cases():
    return [(case_id, problem) for case_id, problem in tiny_cases(seeds=6, max_nodes=6)
            if problem.memory_limit is not None]


@pytest.mark.parametrize("rounds", [1.0, FINE_ROUNDS])
def test_a_repaired_plan_fits_memory_and_a_fitting_plan_is_kept(rounds):
    repaired = 0
    for case_id, problem in _binding_cases():
        for plan in itertools.islice(itertools.product(*(range(len(c)) for c in problem.node_costs)), 300):
            result = repair_memory(problem, plan, round_fraction=rounds)
            if problem.memory_ok(plan):
                assert result == tuple(plan), case_id
            elif result is not None:
                assert problem.memory_ok(result), (case_id, plan)
                repaired += 1
    assert repaired >= 20


@pytest.mark.parametrize("rounds", [1.0, FINE_ROUNDS])
def test_the_total_excess_falls_over_every_round_without_fallback(monkeypatch, rounds):
    rounds_seen: list[tuple[float, bool]] = []  # per round: the excess at its start, whether it fell back
    ranked = memory_repair._ranked_moves

    def watched(problem, adjacency, dense, plan, usage, device, limit, *stop):
        if device is None:  # each round starts with the ranking by total excess
            rounds_seen.append((float(np.maximum(usage - limit, 0.0).sum()), False))
        else:
            rounds_seen[-1] = (rounds_seen[-1][0], True)
        return ranked(problem, adjacency, dense, plan, usage, device, limit, *stop)

    monkeypatch.setattr(memory_repair, "_ranked_moves", watched)
    rounds = 0
    for case_id, problem in _binding_cases():
        for plan in itertools.islice(itertools.product(*(range(len(c)) for c in problem.node_costs)), 300):
            rounds_seen.clear()
            repair_memory(problem, plan, round_fraction=rounds)
            for (before, fell_back), (after, _) in zip(rounds_seen, rounds_seen[1:]):
                assert fell_back or after < before, (case_id, plan, rounds_seen)
                rounds += not fell_back
    assert rounds >= 20
