"""Training runtimes as the cost model sees them: which kernels they run, which communication they
overlap with compute, and which memory they take beyond the model's tensors (`profiles.py`)."""
from solver_plan.runtime.profiles import (DEFAULT_RUNTIME, RUNTIMES, RuntimeProfile, resolve_runtime,
                                          runtime_names)

__all__ = ["DEFAULT_RUNTIME", "RUNTIMES", "RuntimeProfile", "resolve_runtime", "runtime_names"]
