"""How many layers MadPipe-DP can afford in a time budget.

The DP (pipeline/madpipe.py) fills, for each layer l, arrays over the first layer k of the stage
ending at l, the delay level v, the special-memory level m and the normal processors left p; k only
ranges over stages short enough for the candidate period tau, about c L / P layers near the optimum.
One bisection step is O(L (c L / P) V M P) = O(c L^2 V M): quadratic in the layers and, to first
order, independent of P (measured: docs/pipeline-scaling.md). The whole search is a fixed number of
steps per special-processor estimate, so its work is ~ K L^2 for a constant K of the machine. The
layer count allowed by a budget of s seconds is therefore sqrt(s x LAYERS2_PER_SECOND), computed
from the nominal limit only: the same limit gives the same coarsening on a loaded or an idle
machine.
"""
from __future__ import annotations

import math

# L^2 per second for the three estimates together (MadPipe defaults: 10 steps, 11 memory levels,
# 51 delay levels), calibrated with scripts/bench_pipeline_scaling.py on the 2-core development
# machine under load (docs/pipeline-scaling.md); a faster machine only finishes early.
LAYERS2_PER_SECOND = 700.0
MIN_LAYERS = 16


def madpipe_layers(problem, seconds: float | None) -> int:
    """Layers MadPipe-DP may keep in `seconds` (all of them without a limit)."""
    if seconds is None:
        return problem.layers
    affordable = int(math.sqrt(max(0.0, seconds) * LAYERS2_PER_SECOND))
    return min(problem.layers, max(MIN_LAYERS, problem.processors, affordable))
