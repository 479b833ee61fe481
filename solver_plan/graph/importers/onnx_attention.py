"""Find scaled dot-product attention written in ONNX primitives, so it imports as one `Attention`.

Exporters (torch.onnx, tf2onnx) write attention as

    q3 (N,S,H) -Reshape-> (N,S,h,d) -Transpose(0,2,1,3)-> q (N,h,S,d)
    k3 (N,S,Hk) -Reshape-> (N,S,hk,d) -Transpose(0,2,3,1)-> k (N,hk,d,S)   [or (0,2,1,3) then a last-two swap]
    v3 (N,S,Hk) -Reshape-> (N,S,hk,d) -Transpose(0,2,1,3)-> v (N,hk,S,d)
    scores = MatMul(q, k) [-Div/Mul by a constant] [-Add/Where mask] -Softmax(-1) [-Dropout/Cast]
    ctx = MatMul(probs, v) -Transpose(0,2,1,3)-> (N,S,h,d) -Reshape-> out3 (N,S,H)

Imported node by node, the reshapes and transposes can only be split by sample (cost/dims.py), so
a plan could not keep attention split by heads without paying redistributions a runtime does not
pay. As one `Attention(q3, k3, v3)` (heads h, kv_heads hk) it is priced as the zoo's attention:
split by sample, query sequence or heads. The scale and mask (one element-wise pass over the
scores) are dropped, and so are per-head operations between the split into heads and the score
MatMul (rotary embedding, key/value repetition of grouped-query attention: kv_heads is read from
the key projection's split): element-wise passes over q and k, as in the zoo's Attention. A
pattern whose intermediate tensors are used elsewhere is left unfused.
"""
from __future__ import annotations

from dataclasses import dataclass

SKIPPABLE_AFTER_SCORES = ("Div", "Mul", "Add", "Where", "Sub")
SKIPPABLE_AFTER_SOFTMAX = ("Dropout", "Cast", "Identity")


@dataclass(frozen=True)
class AttentionMatch:
    """One attention pattern found in an ONNX graph: the (N, S, H) query, key and value tensors it reads, the
    tensor it produces, head counts, the node indices it replaces, and the last of them (which emits the
    Attention).
    """
    q: str  # (N, S, H) tensors feeding the pattern
    k: str
    v: str
    output: str  # (N, S, H) tensor it produces
    heads: int
    kv_heads: int
    nodes: frozenset  # indices of the nodes it replaces (the last one emits the Attention)
    last: int


class _Graph:
    def __init__(self, model, shapes: dict):
        self.nodes = list(model.graph.node)
        self.shapes = shapes
        self.producer = {}
        self.consumers: dict[str, list[int]] = {}
        for i, node in enumerate(self.nodes):
            for out in node.output:
                self.producer[out] = i
            for name in node.input:
                self.consumers.setdefault(name, []).append(i)

    def node_of(self, tensor: str, *types: str):
        i = self.producer.get(tensor)
        if i is None or self.nodes[i].op_type not in types:
            return None
        return i

    def perm(self, i: int) -> tuple[int, ...] | None:
        for a in self.nodes[i].attribute:
            if a.name == "perm":
                return tuple(a.ints)
        return None

    def sole_consumer(self, tensor: str, inside: set) -> bool:
        return all(c in inside for c in self.consumers.get(tensor, []))


ENTRY_PERMS = ((0, 2, 1, 3), (0, 2, 3, 1))  # (N,S,h,d) -> (N,h,S,d), or straight to keys' (N,h,d,S)
MAX_WALK = 40  # nodes between a projection and the score MatMul (rotary + repeat_kv take ~15)


def _entry(g: _Graph, i: int):
    """(source, heads, entry nodes) when node i is Transpose(ENTRY_PERMS) of Reshape (N,S,W) -> (N,S,h,d)."""
    node = g.nodes[i]
    if node.op_type != "Transpose" or g.perm(i) not in ENTRY_PERMS:
        return None
    reshape = g.node_of(node.input[0], "Reshape")
    if reshape is None:
        return None
    src = g.nodes[reshape].input[0]
    src_shape, split = g.shapes.get(src), g.shapes.get(g.nodes[reshape].output[0])
    if not src_shape or not split or len(src_shape) != 3 or len(split) != 4 or split[:2] != src_shape[:2] \
            or split[2] * split[3] != src_shape[2]:
        return None
    return src, split[2], (i, reshape)


def _heads_in(g: _Graph, tensor: str, nodes: set):
    """Walk back from a score MatMul's operand through per-head nodes (rank >= 4: transposes,
    rotary embedding, key/value repetition) to the one Reshape+Transpose that split a (N, S, W)
    projection into heads; returns (source, heads) or None. Inputs of lower rank (rotary caches)
    stay outside. The caller checks the shapes at both ends."""
    found, seen, todo = set(), set(), [tensor]
    while todo:
        i = g.producer.get(todo.pop())
        if i is None or i in seen:
            continue
        seen.add(i)
        if len(seen) > MAX_WALK:
            return None
        entry = _entry(g, i)
        if entry is not None:
            found.add(entry)
            continue
        for name in g.nodes[i].input:
            shape = g.shapes.get(name)
            if name in g.producer and shape is not None and len(shape) >= 4:
                todo.append(name)
    if len(found) != 1:
        return None
    src, heads, entry_nodes = found.pop()
    nodes.update(seen | set(entry_nodes))
    return src, heads
def _operands_fit(g: _Graph, q_op: str, k_op: str, v_op: str, q, k, v) -> bool:
    """q (N,h,S,d) x k (N,h,d,Sk) and v (N,h,Sk,d), from projections of h x d and hk x d features."""
    qs, ks, vs = g.shapes.get(q_op), g.shapes.get(k_op), g.shapes.get(v_op)
    src_q, src_k, src_v = g.shapes.get(q[0]), g.shapes.get(k[0]), g.shapes.get(v[0])
    if not all(x and len(x) == 4 for x in (qs, ks, vs)) or not all(x and len(x) == 3 for x in (src_q, src_k, src_v)):
        return False
    n, h, s, d = qs
    return (h == q[1] and ks == (n, h, d, ks[3]) and vs == (n, h, ks[3], d) and src_q == (src_q[0], s, h * d)
            and src_k[2] == k[1] * d and src_v[2] == v[1] * d and k[1] == v[1] and h % k[1] == 0)


def find_attention(model, shapes: dict, active: set) -> list[AttentionMatch]:
    """The attention patterns (module docstring) among the `active` nodes of an ONNX model, given inferred
    `shapes`; each node belongs to at most one match.
    """
    g = _Graph(model, shapes)
    matches = []
    taken: set = set()
    for m2, node in enumerate(g.nodes):
        if node.op_type != "MatMul" or m2 not in active or m2 in taken:
            continue
        nodes = {m2}
        x = node.input[0]
        i = g.node_of(x, *SKIPPABLE_AFTER_SOFTMAX)
        while i is not None:
            nodes.add(i)
            x = g.nodes[i].input[0]
            i = g.node_of(x, *SKIPPABLE_AFTER_SOFTMAX)
        sm = g.node_of(x, "Softmax")
        if sm is None:
            continue
        nodes.add(sm)
        x = g.nodes[sm].input[0]
        i = g.node_of(x, *SKIPPABLE_AFTER_SCORES)
        while i is not None and len(nodes) < 12:
            nodes.add(i)
            # follow the operand that carries the scores (the 4-D one produced by the chain)
            x = next((n for n in g.nodes[i].input if n in g.producer and g.shapes.get(n) == g.shapes.get(
                g.nodes[i].output[0])), None)
            if x is None:
                break
            i = g.node_of(x, *SKIPPABLE_AFTER_SCORES)
        m1 = g.node_of(x, "MatMul") if x is not None else None
        if m1 is None:
            continue
        nodes.add(m1)
        q = _heads_in(g, g.nodes[m1].input[0], nodes)
        k = _heads_in(g, g.nodes[m1].input[1], nodes)
        v = _heads_in(g, node.input[1], nodes)
        if not (q and k and v) or not _operands_fit(g, g.nodes[m1].input[0], g.nodes[m1].input[1], node.input[1],
                                                     q, k, v):
            continue
        t = g.consumers.get(node.output[0], [])
        if len(t) != 1 or g.nodes[t[0]].op_type != "Transpose" or g.perm(t[0]) != (0, 2, 1, 3):
            continue
        r = g.consumers.get(g.nodes[t[0]].output[0], [])
        if len(r) != 1 or g.nodes[r[0]].op_type != "Reshape":
            continue
        out = g.nodes[r[0]].output[0]
        nodes.update((t[0], r[0]))
        if shapes.get(out) != shapes.get(q[0]) or k[1] != v[1] or q[1] % k[1]:
            continue
        inside = set(nodes)
        internal = [o for n in nodes if n != r[0] for o in g.nodes[n].output if o]
        if not all(g.sole_consumer(o, inside) for o in internal) or nodes & taken:
            continue
        taken |= nodes
        matches.append(AttentionMatch(q[0], k[0], v[0], out, q[1], k[1], frozenset(nodes), r[0]))
    return matches
