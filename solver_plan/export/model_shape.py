"""The shape of the model a hybrid plan was made for, read back from the plan's `model` (a zoo spec
or a Hugging Face config.json spec) with the planner's own reader, so a runtime's model flags
(layers, hidden size, heads, sequence length, ...) are those the plan priced."""
from __future__ import annotations

from dataclasses import dataclass

from solver_plan.errors import InputError


@dataclass(frozen=True)
class ModelShape:
    """What an exporter writes of the model; `spec` is the hybrid planner's TransformerSpec."""
    spec: object

    @property
    def query_groups(self) -> int:
        """Key/value head groups: kv_heads under grouped-query attention, else the number of heads."""
        return self.spec.kv_heads or self.spec.heads

    @property
    def grouped_query(self) -> bool:
        """Whether the model uses grouped-query attention (fewer key/value heads than query heads)."""
        return self.query_groups != self.spec.heads

    @property
    def biases(self) -> str:
        """Which linear layers have biases: "all" (GPT-2), "none" (LLaMA, Mistral, Mixtral), "qkv"
        (Qwen2: q/k/v only) or "mixed" (any other combination)."""
        s = self.spec
        if s.qkv_bias and s.out_bias and s.mlp_bias:
            return "all"
        if not (s.qkv_bias or s.out_bias or s.mlp_bias):
            return "none"
        return "qkv" if s.qkv_bias and not (s.out_bias or s.mlp_bias) else "mixed"


def model_shape(model: str) -> tuple[ModelShape | None, str | None]:
    """(shape, None), or (None, why) when the plan's model cannot be read here (a config.json that
    is not on this machine): the exporter then lists the model flags as the user's to add."""
    from solver_plan.hybrid.model import transformer_spec
    try:
        return ModelShape(transformer_spec(model)), None
    except InputError as exc:
        return None, f"model {model!r} could not be read here ({exc})"
