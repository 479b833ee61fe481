"""Model state a pipeline stage keeps per parameter: the one rule every pipeline planner, schedule,
the validator and the INFEASIBLE diagnoses charge (through `ChainProblem.state_memory`).

The bytes per parameter by optimizer and precision are the model-state module's
(`cost/model_state.py`: adam w + g + m + 2 o = 16 B in mixed precision and in fp32, sgd-momentum,
sgd, pipedream 3 w); this module restates them per byte of a chain's weights. A chain gives each
layer's weights W in bytes of some dtype (the working copy as the cost model priced it, or fp32 as
profiles were measured): a stage keeps
    state_memory = W x state_bytes_per_parameter / weight_bytes_per_parameter.
"""
from __future__ import annotations

from dataclasses import dataclass

from solver_plan.cost.model_state import (DEFAULT_OPTIMIZER, MOMENTS, OPTIMIZERS, check_optimizer,
                                          state_per_parameter)
from solver_plan.cost.precision import TrainingPrecision
from solver_plan.errors import InputError

__all__ = ["DEFAULT_OPTIMIZER", "DEFAULT_STATE", "MOMENTS", "OPTIMIZERS", "ModelState", "check_optimizer",
           "model_state", "pipedream_rule", "state_bytes_per_parameter", "state_terms"]


def state_terms(precision, optimizer: str = DEFAULT_OPTIMIZER) -> tuple[tuple[str, float], ...]:
    """(term, bytes per parameter) of the model state of `precision` (a `TrainingPrecision`) trained
    with `optimizer` (`cost.model_state.state_per_parameter`); they sum to `state_bytes_per_parameter`."""
    return state_per_parameter(precision, optimizer).terms()


def state_bytes_per_parameter(precision, optimizer: str = DEFAULT_OPTIMIZER) -> float:
    """Bytes a stage keeps per parameter for `precision` (a `TrainingPrecision`) and `optimizer`:
    adam w + g + m + 2 o, sgd-momentum w + g + m + o, sgd w + g + m (ZeRO section 3.1: 16 B for
    mixed-precision Adam), pipedream 3 w (cost/model_state.py)."""
    return sum(value for _, value in state_terms(precision, optimizer))


@dataclass(frozen=True)
class ModelState:
    """How many bytes of model state a stage keeps per byte of the chain's weights.

    `weight_bytes_per_parameter`: the dtype size in which the chain gives W (2 for a zoo model
    priced in mixed bf16, 4 for PipeDream profiles measured in fp32)."""
    precision: str  # `TrainingPrecision.name`: fp32, tf32, mixed-bf16, ...
    optimizer: str
    terms: tuple[tuple[str, float], ...]  # (term, bytes per parameter)
    weight_bytes_per_parameter: float

    def __post_init__(self):
        check_optimizer(self.optimizer, "model state optimizer")
        if not isinstance(self.precision, str) or not self.precision:
            raise InputError(f"precision must be a name, got {self.precision!r}", "model state precision")
        if not self.terms or any(not (isinstance(v, (int, float)) and v >= 0) for _, v in self.terms):
            raise InputError(f"state terms must be non-negative byte counts, got {self.terms!r}", "model state")
        w = self.weight_bytes_per_parameter
        if isinstance(w, bool) or not isinstance(w, (int, float)) or not w > 0:
            raise InputError(f"weight bytes per parameter must be positive, got {w!r}", "model state")

    @property
    def bytes_per_parameter(self) -> float:
        """Bytes of model state per parameter: the sum of its terms."""
        return float(sum(v for _, v in self.terms))

    @property
    def weight_factor(self) -> float:
        """State bytes per byte of the chain's W (PipeDream's rule on its own weights: 3)."""
        return self.bytes_per_parameter / self.weight_bytes_per_parameter

    @property
    def rule(self) -> str:
        """The memory rule's name in plan JSON: "pipedream-3w" or "per-parameter"."""
        return "pipedream-3w" if self.optimizer == "pipedream" else "per-parameter"

    def describe(self) -> str:
        """One line: the precision, optimizer and bytes per parameter, term by term."""
        parts = " + ".join(f"{name} {value:g}" for name, value in self.terms)
        if self.optimizer == "pipedream":
            return (f"PipeDream's rule: 3 x the weights ({self.precision} weights: {self.bytes_per_parameter:g} B "
                    f"per parameter = {parts})")
        return f"{self.precision} with {self.optimizer}: {self.bytes_per_parameter:g} B per parameter ({parts})"

    def to_dict(self) -> dict:
        """The model state's fields in plan JSON."""
        return {"precision": self.precision, "optimizer": self.optimizer, "memory_rule": self.rule,
                "state_bytes_per_parameter": self.bytes_per_parameter,
                "state_terms": {name: value for name, value in self.terms},
                "weight_bytes_per_parameter": self.weight_bytes_per_parameter}


def model_state(precision, optimizer: str = DEFAULT_OPTIMIZER,
                weight_bytes_per_parameter: float | None = None) -> ModelState:
    """The `ModelState` of `precision` (a `TrainingPrecision` or a name `TrainingPrecision.parse`
    takes without a device: fp32, tf32, bf16, fp16, fp8) and `optimizer`, for a chain whose W is in
    `weight_bytes_per_parameter` (default: the precision's parameter dtype). The pipedream rule is
    3 x the chain's W, so there the precision's parameter bytes are those of W."""
    if not isinstance(precision, TrainingPrecision):
        precision = TrainingPrecision.parse(precision, None, "precision")
    optimizer = check_optimizer(optimizer)
    weight = float(precision.parameters.bytes if weight_bytes_per_parameter is None else weight_bytes_per_parameter)
    terms = state_terms(precision, optimizer)
    if optimizer == "pipedream":
        terms = tuple((name, weight) for name, _ in terms)
    return ModelState(precision.name, optimizer, terms, weight)


def pipedream_rule(precision="fp32", weight_bytes_per_parameter: float | None = None) -> ModelState:
    """PipeDream's 3 x weights, stated explicitly (comparisons with PipeDream and the MadPipe paper)."""
    return model_state(precision, "pipedream", weight_bytes_per_parameter)


# Chains built without a precision (Python callers, tests): W in fp32, trained with Adam (16 B/param).
DEFAULT_STATE = model_state("fp32", DEFAULT_OPTIMIZER)
