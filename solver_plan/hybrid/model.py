"""The transformer a hybrid plan trains: shapes, parameter counts and FLOPs, from a zoo spec.

Hybrid planning works on transformer-block boundaries, so it needs a GPT-style decoder spec (`gpt2*`
or any llm-shapes model, e.g. `gpt3-175B`, or `gpt2:layers=96,hidden=12288,...`). The per-operator
configuration of one block is solved on the project's own graph (`block_spec`); the counts here
are closed forms of the same graph (checked against it in tests/test_hybrid_model.py).
"""
from __future__ import annotations

from dataclasses import dataclass

from solver_plan.errors import InputError

GPT_FAMILY_NOTE = "hybrid plans need a GPT-style decoder spec (gpt2, gpt2-*, or an llm-shapes model such as gpt3-175B)"


@dataclass(frozen=True)
class TransformerSpec:
    """A decoder of `layers` identical pre-norm blocks, token + position embeddings and a tied
    output projection (solver_plan/graph/zoo/gpt.py)."""
    name: str
    layers: int
    hidden: int
    ffn: int
    heads: int
    head_dim: int
    seq: int
    vocab: int
    positions: int

    def __post_init__(self):
        for key in ("layers", "hidden", "ffn", "heads", "head_dim", "seq", "vocab", "positions"):
            value = getattr(self, key)
            if not isinstance(value, int) or isinstance(value, bool) or value <= 0:
                raise InputError(f"{key} must be a positive integer, got {value!r}", self.name)
        if self.seq > self.positions:
            raise InputError(f"seq ({self.seq}) exceeds positions ({self.positions})", self.name)

    @property
    def attn_width(self) -> int:
        return self.heads * self.head_dim

    # --- parameters ----------------------------------------------------------------------
    @property
    def block_params(self) -> int:
        """q, k, v, out projections with biases, two-layer MLP with biases, two layer norms."""
        h, w, f = self.hidden, self.attn_width, self.ffn
        return 3 * (h * w + w) + (w * h + h) + (h * f + f) + (f * h + h) + 2 * 2 * h

    @property
    def embedding_params(self) -> int:
        """Token and position embeddings (the output projection is tied to the token embedding)."""
        return (self.vocab + self.positions) * self.hidden

    @property
    def head_params(self) -> int:
        """Final layer norm (the tied output projection is counted once, in the embedding)."""
        return 2 * self.hidden

    @property
    def total_params(self) -> int:
        return self.layers * self.block_params + self.embedding_params + self.head_params

    # --- FLOPs (multiply-add = 2) -------------------------------------------------------
    def block_forward_flops(self, batch: int) -> float:
        """2 x tokens x (matmul parameters) + attention scores and context 2 x 2 x b s^2 (a d)."""
        h, w, f, s = self.hidden, self.attn_width, self.ffn, self.seq
        return 2.0 * batch * s * (3 * h * w + w * h + 2 * h * f) + 4.0 * batch * s * s * w

    def attention_core_forward_flops(self, batch: int) -> float:
        """Q K^T and scores x V: what selective recomputation recomputes (Korthikanti et al. 2022)."""
        return 4.0 * batch * self.seq * self.seq * self.attn_width

    def logits_forward_flops(self, batch: int) -> float:
        return 2.0 * batch * self.seq * self.hidden * self.vocab

    def model_flops_per_step(self, global_batch: int) -> float:
        """Training FLOPs without recomputation: 3 x forward (backward = 2 x forward) of every block
        and of the logits. For a(d) = h and ffn = 4h this is Narayanan et al. (SC'21) eq. (3) without
        its recomputation pass: 72 B s l h^2 (1 + s/(6h) + V/(12 l h)), i.e. 6 x params x tokens plus
        attention 12 x layers x h x s^2 x batch."""
        return 3.0 * (self.layers * self.block_forward_flops(global_batch)
                      + self.logits_forward_flops(global_batch))

    # --- the project's graph of one block ---------------------------------------------------
    def block_spec(self, micro_batch: int) -> str:
        """A zoo spec of the same model with one block and batch = micro-batch size: solved once per
        (submesh, micro-batch) and reused for every block (tying)."""
        return (f"gpt2:layers=1,hidden={self.hidden},heads={self.heads},head_dim={self.head_dim},"
                f"ffn={self.ffn},seq={self.seq},positions={self.positions},vocab={self.vocab},batch={micro_batch}")


def transformer_spec(model: str) -> TransformerSpec:
    """The TransformerSpec of a zoo spec string; InputError for anything but a GPT-style decoder."""
    from solver_plan.graph.zoo import gpt
    from solver_plan.graph.zoo.catalog import model_entry
    from solver_plan.graph.zoo.spec import resolve_options, split_spec

    name, raw = split_spec(model)
    entry = model_entry(name)
    if entry.build is not gpt.gpt:
        raise InputError(f"{GPT_FAMILY_NOTE}; got {name!r}", "--model")
    options = resolve_options(entry, raw)
    return TransformerSpec(model.strip(), layers=options["layers"], hidden=options["hidden"], ffn=options["ffn"],
                           heads=options["heads"], head_dim=options["head_dim"], seq=options["seq"],
                           vocab=options["vocab"], positions=options["positions"])
