"""Execution simulator (FlexFlow task graph; full and delta simulation), Chrome traces, plan files,
and the MCMC strategy search."""
from solver_plan.simulate.plan_file import load_plan_json
from solver_plan.simulate.simulator import StrategySimulator, simulate_strategy
from solver_plan.simulate.timeline import Simulation, format_simulation

__all__ = ["Simulation", "StrategySimulator", "format_simulation", "load_plan_json", "simulate_strategy"]
