"""Every recomputation option of every stage of a cut, for the brute forces of tests/test_hybrid_*.py:
none, selective and full recomputation of all its blocks, and (1F1B, GPipe) partial recomputation of
r = 1 ... k - 1 of its k blocks, each stage priced by `price` with that choice alone."""
from dataclasses import replace

from solver_plan.hybrid.evaluate import price

MODES = ("none", "selective", "full")


def stage_options(ctx, par, profile, cut) -> list[list]:
    """Per stage, the StagePlans of its options (a stage's time and memory depend only on its own)."""
    uniform = {r: price(ctx, replace(par, recompute=r), profile, None, layers=cut) for r in MODES}
    options = [[uniform[r].stages[i] for r in MODES] for i in range(par.pp)]
    if par.schedule in ("1f1b", "gpipe"):
        mixed = replace(par, recompute="per-stage")
        for i, k in enumerate(cut):
            for r in range(1, k):
                blocks = tuple(r if j == i else None for j in range(par.pp))
                options[i].append(price(ctx, mixed, profile, None, layers=cut, modes=("full",) * par.pp,
                                        recompute_blocks=blocks).stages[i])
    return options
