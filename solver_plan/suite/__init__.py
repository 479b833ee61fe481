"""The standard suite: seeded generators of per-operator problems that do not fold, named by model
specs such as `random-dag:nodes=1000,candidates=6-30,seed=3,memory=binding` (see docs/standard-suite.md).

`is_problem_spec(spec)` says whether a MODEL spec names a generated problem, `check_problem_spec`
validates one without building it, `resolve_problem` builds the `ConfigProblem`.
"""
from solver_plan.suite.spec import GENERATED_CLUSTER, ProblemSpec, check_problem_spec, is_problem_spec, parse_problem_spec
from solver_plan.suite.generators import generate, resolve_problem

__all__ = ["GENERATED_CLUSTER", "ProblemSpec", "check_problem_spec", "is_problem_spec", "parse_problem_spec",
           "generate", "resolve_problem"]
