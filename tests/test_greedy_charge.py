"""The greedy pass's and local search's nominal charges (`greedy_plans.greedy_units`,
`local_search.node_units`): what each counts, never how long anything takes (their calibration is
scripts/bench_greedy_charge.py's)."""
from __future__ import annotations

import dataclasses

import pytest

from solver_plan.deadline import WORK_UNIT_S, WorkMeter
from solver_plan.intra.greedy_plans import (GREEDY_TABLE_UNITS_PER_ENTRY, GREEDY_VISITS, greedy_assignment,
                                            greedy_pass_seconds, greedy_units, least_memory_plan,
                                            reserving_greedy)
from solver_plan.intra.local_search import (MEMORY_UNITS_PER_ENTRY, MEMORY_VISIT_UNITS, VISIT_UNITS,
                                            device_entries, improve, node_units, tracker_units)
from solver_plan.suite.generators import resolve_problem

BINDING = "random-dag:nodes=200,candidates=6-12,seed=3,memory=binding,devices=8"


def test_a_visit_is_charged_by_its_device_entries_under_a_memory_limit():
    problem = resolve_problem(BINDING)
    entries = [sum(len(devices) for devices in problem.node_devices[node]) for node in range(problem.num_nodes)]
    assert device_entries(problem).tolist() == entries
    assert node_units(problem) == pytest.approx(
        [VISIT_UNITS + MEMORY_VISIT_UNITS + MEMORY_UNITS_PER_ENTRY * e for e in entries])
    assert node_units(problem.with_memory_limit(None)) == [VISIT_UNITS] * problem.num_nodes


def test_a_visit_costs_the_same_whatever_the_node_degree():
    """The memory check is one gather over the node's entries: no term in candidates x degree."""
    problem = resolve_problem(BINDING)
    fewer_edges = dataclasses.replace(problem, edges=problem.edges[: len(problem.edges) // 2],
                                      edge_costs=problem.edge_costs[: len(problem.edges) // 2])
    assert node_units(fewer_edges) == node_units(problem)


def test_the_greedy_pass_adds_its_unavoidable_memory_table_under_a_limit():
    problem = resolve_problem(BINDING)
    visits = [GREEDY_VISITS * units for units in node_units(problem)]
    table = [GREEDY_TABLE_UNITS_PER_ENTRY * e for e in device_entries(problem)]
    assert greedy_units(problem) == pytest.approx([v + t for v, t in zip(visits, table)])
    assert greedy_units(problem, table=False) == pytest.approx(visits)
    free = problem.with_memory_limit(None)
    assert greedy_units(free) == [GREEDY_VISITS * VISIT_UNITS] * problem.num_nodes
    assert greedy_pass_seconds(problem) == pytest.approx(sum(greedy_units(problem)) * WORK_UNIT_S)


def test_each_pass_charges_what_its_units_say():
    """What the budget gates read (`greedy_pass_seconds`) is what a greedy pass spends; the
    reserving pass spends no more; an improve pass spends `node_units` a visit."""
    problem = resolve_problem(BINDING)
    greedy_meter, reserving_meter, improve_meter = WorkMeter(None), WorkMeter(None), WorkMeter(None)
    plan = greedy_assignment(problem, meter=greedy_meter)
    reserving_greedy(problem, least_memory_plan(problem), meter=reserving_meter)
    improve(problem, plan, max_passes=1, meter=improve_meter)
    assert greedy_meter.units * WORK_UNIT_S == pytest.approx(greedy_pass_seconds(problem))
    assert reserving_meter.units < greedy_meter.units
    assert improve_meter.units == pytest.approx(tracker_units(problem, plan) + sum(node_units(problem)))
    assert tracker_units(problem, plan) > 0 and tracker_units(problem.with_memory_limit(None), plan) == 0
