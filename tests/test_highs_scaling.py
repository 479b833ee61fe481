"""HiGHS sees memory rows in units of their largest coefficient: with bytes beside 0/1 rows its
MIP once declared a plan 0.07% worse than a feasible one optimal (standard suite, random DAG)."""
import numpy as np
import pytest

from solver_plan.intra import isolated
from solver_plan.intra.linear_model import config_model, decode, min_peak_memory_model, row_scales
from solver_plan.intra.solve import solve
from solver_plan.result import Status
from solver_plan.suite.generators import resolve_problem


def test_row_scales_touch_only_rows_with_large_coefficients():
    problem = resolve_problem("random-dag:nodes=20,candidates=6,seed=1,memory=binding")
    model = config_model(problem)
    scales = row_scales(model)
    largest = np.zeros(model.num_rows)
    np.maximum.at(largest, model.rows, np.abs(model.values))
    assert np.all(scales[largest <= 1e3] == 1.0)
    smallest = np.full(model.num_rows, np.inf)
    np.minimum.at(smallest, model.rows, np.abs(model.values))
    memory_rows = largest > 1e3
    assert memory_rows.any()
    assert np.all(scales[memory_rows] * largest[memory_rows] <= 1.0 + 1e-12)
    assert np.all(scales[memory_rows] * smallest[memory_rows] >= 1e-6 * (1 - 1e-12))


def test_min_peak_model_keeps_its_peak_column():
    # the peak rows hold bytes and a -1 peak column: scaling them to unit bytes would push the -1
    # below HiGHS' drop threshold and the least peak to 0
    problem = resolve_problem("random-dag:nodes=20,candidates=6,seed=1,memory=binding")
    model = min_peak_memory_model(problem)
    # in a worker process, as the planners call HiGHS (isolated: highspy and ortools in one process clash)
    outcome = isolated.call("highspy", "solver_plan.intra.backends.highs", "solve_with_highs", timeout=60,
                            model=model, time_limit=30)
    assert outcome.status == Status.OPTIMAL  # issue 21: backends answer in the one Status enum
    plan = decode(model, outcome.x_values)
    assert outcome.objective == pytest.approx(problem.device_memory(plan).max(), rel=1e-6)
    assert outcome.objective > 0


def test_milp_agrees_with_cpsat_on_the_suite_instance_it_once_missed():
    problem = resolve_problem("random-dag:nodes=100,candidates=6,seed=4,memory=binding")
    milp = solve(problem, "milp", time_limit=60)
    cpsat = solve(problem, "cpsat", time_limit=60)
    assert milp.status.value == "OPTIMAL" == cpsat.status.value
    assert milp.objective == pytest.approx(cpsat.objective, rel=1e-9)
    # the plan keeps the memory limit exactly, in bytes
    assert problem.device_memory(milp.assignment).max() <= problem.memory_limit

