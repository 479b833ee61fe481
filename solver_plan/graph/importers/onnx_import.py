"""ONNX model -> `Graph`: shapes from ONNX shape inference, operators mapped onto `OpType`s,
parameters from initializers, FLOPs from the shapes (by `graph.ops.infer`, as for every graph).

MODEL form: `path/to/model.onnx`, optionally followed by `:name=value,...` giving symbolic input
dimensions (`batch=8,sequence=128`; `batch` also fills any unnamed or unlisted axis 0 of an input)
and `opaque=1` (import unknown operators as opaque ones, below). Needs the optional `onnx` package
(`pip install 'solver-plan[onnx]'`).

Mapping (ONNX -> OpType):
- Gemm, MatMul with a constant 2-D weight -> Linear (a following Add of a constant vector of the
  output width is folded in as the bias); MatMul of two activations -> MatMul (attention scores);
- Conv (2-D, symmetric pads, no dilation) -> Conv2d; MaxPool/AveragePool/Global*Pool -> Pool2d;
- BatchNormalization -> BatchNorm; LayerNormalization -> LayerNorm (without bias: the RMS form,
  H parameters); Softmax/LogSoftmax -> Softmax; SoftmaxCrossEntropyLoss -> SoftmaxCrossEntropy;
- Gather of a constant 2-D table by activation ids -> Embedding;
- Relu, Gelu, Tanh, Sigmoid, Erf, Dropout, Sqrt, Exp, ... -> Unary; Add/Sub/Mul/Div/Pow of two
  activations -> Binary; of an activation and a constant -> Unary "scale";
- Reshape, Flatten, Squeeze, Unsqueeze -> Reshape; Transpose -> Transpose; Concat -> Concat;
  Split -> Split; Identity and Cast are aliases (no operator).
- Documented opaque costs (`OpType.PROFILED`, attribute `onnx_op`), for operators with no
  counterpart: data movement (Slice, Expand, Tile, Pad, Where, Gather of activations, Resize, ...)
  costs 0 FLOPs and its constant inputs (indices, masks, caches) are no parameters; reductions
  (ReduceMean, ...) one FLOP per input element; an element-wise operator with a constant vector
  (rank 1: a decomposed norm's scale, an unfused bias) one FLOP per output element plus the
  vector as parameters (higher-rank constants, such as rotary cos/sin caches, are buffers).
  With `opaque=1`, any other operator becomes such an opaque operator costing one FLOP per output
  element, with its float initializers as parameters; without it, the import fails naming every
  unsupported operator type. Nothing is ever silently free.
Scaled dot-product attention written in primitives (reshape/transpose to heads, MatMul, scale,
mask, Softmax, MatMul, back) becomes one Attention (onnx_attention.py), so plans may split it by
heads as the zoo's attention. Shape arithmetic on constants is evaluated first (onnx_fold.py), so
shapes computed at run time (ViT's class-token Expand) are known. Nodes that only compute
constants or shapes (Shape, Constant, Range, and whatever consumes only those) are folded away.
Parameters are the float initializers of more than one element that mapped operators consume,
directly or through value-preserving constant nodes (views, Expand, Slice, Concat, a Gather at
constant positions): constant vectors (above), learned tables added to activations (GPT-2's and
BERT's position and token-type tables, ViT's position embedding) and pieces concatenated to them
(ViT's class token); additive masks (0 / very negative values) and constants multiplied in (rotary
caches) are buffers. A rank-0 tensor becomes shape (1,).
"""
from __future__ import annotations

import math
from pathlib import Path

from solver_plan.errors import GraphError, InputError
from solver_plan.graph.builder import GraphBuilder
from solver_plan.graph.ir import Graph, Tensor
from solver_plan.graph.ops import OpType

UNARY = {"Relu": "relu", "LeakyRelu": "relu", "PRelu": "relu", "Clip": "relu", "Elu": "relu", "Selu": "relu",
         "Gelu": "gelu", "Tanh": "tanh", "Erf": "tanh", "Softplus": "tanh", "Sigmoid": "sigmoid",
         "HardSigmoid": "sigmoid", "HardSwish": "sigmoid", "Dropout": "dropout", "Sqrt": "scale",
         "Cos": "tanh", "Sin": "tanh", "Softsign": "tanh", "Mish": "tanh", "IsNaN": "identity",
         "Reciprocal": "scale", "Neg": "scale", "Exp": "scale", "Log": "scale", "Abs": "scale", "Not": "identity",
         "Floor": "scale", "Ceil": "scale", "Round": "scale", "Sign": "scale"}
BINARY = {"Add": "add", "Sub": "add", "Mul": "mul", "Div": "mul", "Pow": "mul", "Max": "add", "Min": "add",
          "Equal": "add", "Greater": "add", "Less": "add", "And": "mul", "Or": "add"}
ALIASES = ("Identity", "Cast", "CastLike")
RESHAPES = ("Reshape", "Flatten", "Squeeze", "Unsqueeze")
DATA_MOVEMENT = ("Slice", "Expand", "Tile", "Pad", "Where", "Gather", "GatherElements", "GatherND", "Resize",
                 "Upsample", "ScatterND", "ScatterElements", "DepthToSpace", "SpaceToDepth", "Trilu", "OneHot",
                 "Range", "ConstantOfShape", "Compress", "ReverseSequence")
REDUCTIONS = ("ReduceMean", "ReduceSum", "ReduceMax", "ReduceMin", "ReduceProd", "ReduceL2", "ReduceSumSquare",
              "ArgMax", "ArgMin", "TopK", "CumSum")
VALUE_PRESERVING = ("Identity", "Cast", "Reshape", "Flatten", "Squeeze", "Unsqueeze", "Transpose", "Expand", "Tile",
                    "Slice", "Gather", "Concat")  # a constant's values pass through these unchanged
METADATA = ("Shape", "Size", "Constant")  # outputs describe shapes or constants, never activations
DATA_INPUTS = {"Reshape": (0,), "Expand": (0,), "Slice": (0,), "Squeeze": (0,), "Unsqueeze": (0,), "Tile": (0,),
               "Pad": (0,), "Resize": (0,), "Upsample": (0,), "Split": (0,), "TopK": (0,), "ConstantOfShape": (),
               "Range": (), "Clip": (0,), "Dropout": (0,), "OneHot": (0,), "ReduceMean": (0,), "ReduceSum": (0,),
               "ReduceMax": (0,), "ReduceMin": (0,), "CumSum": (0,)}
FLOAT_TYPES = {1: 4, 10: 2, 11: 8, 16: 2}  # TensorProto FLOAT, FLOAT16, DOUBLE, BFLOAT16: bytes
OPTION_OPAQUE = "opaque"


def _onnx():
    try:
        import onnx
    except ImportError:
        raise InputError("reading ONNX models needs the onnx package: pip install 'solver-plan[onnx]'",
                         "--model") from None
    return onnx


def load_onnx(path: str | Path, options: dict[str, str] | None = None, name: str | None = None) -> Graph:
    """`Graph` from an ONNX file (module docstring for the mapping); `options` give symbolic input dimensions
    and `opaque=1`. Needs the optional `onnx` package.
    """
    onnx = _onnx()
    path = Path(path)
    where = str(path)
    options = dict(options or {})
    opaque = _flag(options.pop(OPTION_OPAQUE, "0"), where)
    dims = {}
    for key, text in options.items():
        if not (text.isascii() and text.isdigit()) or int(text) < 1:
            raise InputError(f"dimension {key!r} expects a positive integer, got {text!r}", where)
        dims[key] = int(text)
    from solver_plan.files import check_regular_file
    check_regular_file(path, "ONNX model")  # a FIFO would block onnx.load, /dev/zero never end
    try:
        model = onnx.load(str(path), load_external_data=False)  # shapes suffice: weights are never read
    except FileNotFoundError:
        raise InputError("no such ONNX file", where) from None
    except Exception as exc:  # protobuf DecodeError and friends: a truncated or foreign file
        raise InputError(f"cannot read the ONNX model ({type(exc).__name__}: {str(exc)[:120]})", where) from None
    if not model.graph.node:
        raise InputError("the ONNX model has no nodes (truncated or not a model?)", where)
    _fix_input_dims(model, dims, where)

    def infer(model):
        try:
            return onnx.shape_inference.infer_shapes(model, data_prop=True)
        except Exception as exc:
            raise InputError(f"ONNX shape inference failed ({str(exc).splitlines()[0][:160]})", where) from None

    from solver_plan.graph.importers.onnx_fold import fold_shape_arithmetic
    model = fold_shape_arithmetic(onnx, model, infer)
    try:
        return _Importer(onnx, model, where, opaque).run(name or path.stem)
    except GraphError as exc:
        raise InputError(f"the imported graph is invalid: {exc}", where) from None


def _flag(text: str, where: str) -> bool:
    if text.lower() in ("1", "true", "yes"):
        return True
    if text.lower() in ("0", "false", "no"):
        return False
    raise InputError(f"option {OPTION_OPAQUE!r} expects 1/0, got {text!r}", where)


def _fix_input_dims(model, dims: dict[str, int], where: str) -> None:
    """Give every symbolic input dimension its value, or fail naming the tensor and dimension."""
    initializers = {t.name for t in model.graph.initializer}
    used = set()
    for tensor in model.graph.input:
        if tensor.name in initializers:
            continue
        if not tensor.type.HasField("tensor_type"):
            raise InputError(f"input {tensor.name!r} is not a tensor", where)
        for axis, dim in enumerate(tensor.type.tensor_type.shape.dim):
            if dim.HasField("dim_value") and dim.dim_value > 0:
                continue
            label = dim.dim_param or f"axis {axis}"
            value = dims.get(dim.dim_param) if dim.dim_param else None
            if value is None and axis == 0:
                value = dims.get("batch")
                used.add("batch")
            if value is None:
                key = dim.dim_param or ("batch" if axis == 0 else "<name>")
                raise InputError(f"input tensor {tensor.name!r} has an unknown dimension {label!r}; give it as "
                                 f"{where}:{key}=N", where)
            used.add(dim.dim_param)
            dim.dim_value = value
    unknown = sorted(set(dims) - used - {"batch"})
    if unknown:
        raise InputError(f"option(s) {', '.join(map(repr, unknown))} name no symbolic input dimension", where)


class _Importer:
    def __init__(self, onnx, model, where: str, opaque: bool):
        self.onnx, self.model, self.where, self.opaque = onnx, model, where, opaque
        graph = model.graph
        self.initializers = {t.name: t for t in graph.initializer}
        self.shapes: dict[str, tuple[int, ...] | None] = {}
        for info in list(graph.input) + list(graph.value_info) + list(graph.output):
            self.shapes[info.name] = self._shape_of(info)
        for t in graph.initializer:
            self.shapes[t.name] = tuple(t.dims)
        self.tensors: dict[str, Tensor] = {}  # ONNX activation name -> our tensor
        self.consumers: dict[str, list] = {}
        for node in graph.node:
            for name in node.input:
                self.consumers.setdefault(name, []).append(node)
        dtype = next((FLOAT_TYPES[t.data_type] for t in graph.initializer if t.data_type in FLOAT_TYPES), 4)
        self.b = GraphBuilder("onnx", dtype_bytes=dtype)
        self.folded: dict[str, str] = {}  # output of a bias Add folded into a Linear -> the Linear's output
        self.names: set[str] = set()
        self.const_src: dict[str, str] = {}
        self.const_producer: dict[str, object] = {}  # output of a folded (constant) node -> the node
        self.claimed: dict[str, str] = {}  # initializer -> the operator that owns its parameters
        self.active = self._active_nodes()
        from solver_plan.graph.importers.onnx_attention import find_attention
        matches = find_attention(model, self.shapes, self.active)
        self.attention = {m.last: m for m in matches}  # node index -> the Attention it emits
        self.fused = {i for m in matches for i in m.nodes} - set(self.attention)

    @staticmethod
    def _shape_of(info) -> tuple[int, ...] | None:
        if not info.type.HasField("tensor_type") or not info.type.tensor_type.HasField("shape"):
            return None
        dims = info.type.tensor_type.shape.dim
        if any(not d.HasField("dim_value") or d.dim_value < 1 for d in dims):
            return None
        return tuple(d.dim_value for d in dims)

    def shape(self, name: str, node_label: str) -> tuple[int, ...]:
        shape = self.shapes.get(name)
        if shape is None:
            raise InputError(f"shape inference left the shape of tensor {name!r} (used by {node_label}) unknown; "
                             "export with static shapes or give the symbolic input dimensions as :name=N", self.where)
        return shape or (1,)  # rank 0 -> (1,)

    def run(self, graph_name: str) -> Graph:
        self.b.name = graph_name
        for tensor in self.model.graph.input:
            if tensor.name not in self.initializers:
                shape = self.shape(tensor.name, "the graph inputs")
                self.tensors[tensor.name] = self.b.input(shape, name=self._unique(tensor.name))
        unknown = sorted({n.op_type for i, n in enumerate(self.model.graph.node)
                          if i in self.active and i not in self.fused and not self._known(n)})
        if unknown and not self.opaque:
            raise InputError(f"unsupported ONNX operator(s) {', '.join(unknown)}; import them as opaque operators "
                             f"(1 FLOP per output element) with {self.where}:{OPTION_OPAQUE}=1", self.where)
        for index, node in enumerate(self.model.graph.node):
            if index in self.attention:
                self._attention(node, index, self.attention[index])
            elif index in self.active and index not in self.fused:
                self._import(node, index)
        if len(self.b._ops) == len([t for t in self.model.graph.input if t.name not in self.initializers]):
            raise InputError("no operator of the model consumes its inputs", self.where)
        return self.b.build()

    # --- classification -----------------------------------------------------------------------
    def _data_inputs(self, node) -> list[str]:
        positions = DATA_INPUTS.get(node.op_type)
        names = [n for i, n in enumerate(node.input) if n and (positions is None or i in positions)]
        return names

    def _active_nodes(self) -> set[int]:
        """Nodes computing activations: reachable from the graph inputs through data inputs (ONNX
        nodes are topologically sorted); the rest compute constants or shapes and are folded away."""
        live = {t.name for t in self.model.graph.input if t.name not in self.initializers}
        active = set()
        for index, node in enumerate(self.model.graph.node):
            if node.op_type not in METADATA and any(n in live for n in self._data_inputs(node)):
                active.add(index)
                live.update(o for o in node.output if o)
            else:
                for output in node.output:
                    self.const_producer[output] = node
                if node.op_type in ("Transpose", "Identity", "Cast", "Reshape", "Squeeze", "Unsqueeze") and node.input:
                    self.const_src[node.output[0]] = node.input[0]  # a weight seen through a view
        self.live = live
        return active

    def _known(self, node) -> bool:
        t = node.op_type
        return (t in UNARY or t in BINARY or t in ALIASES or t in RESHAPES or t in DATA_MOVEMENT or t in REDUCTIONS
                or t in ("Gemm", "MatMul", "Conv", "MaxPool", "AveragePool", "GlobalAveragePool", "GlobalMaxPool",
                         "BatchNormalization", "LayerNormalization", "SimplifiedLayerNormalization", "Softmax",
                         "LogSoftmax", "Transpose", "Concat", "Split", "SoftmaxCrossEntropyLoss"))

    # --- helpers -----------------------------------------------------------------------------
    def _unique(self, name: str) -> str:
        base = (name or "node").strip("/") or "node"  # exporters' scoped names ("/layers.0/attn/MatMul") kept
        out, i = base, 1
        while out in self.names:
            out, i = f"{base}_{i}", i + 1
        self.names.add(out)
        return out

    def _attrs(self, node) -> dict:
        return {a.name: self.onnx.helper.get_attribute_value(a) for a in node.attribute}

    def _root(self, name: str) -> str:
        while name in self.const_src:
            name = self.const_src[name]
        return name

    def _claim(self, name: str, owner: str) -> str | None:
        """Record that `owner` holds the weight `name`; the earlier owner when it is shared (tied)."""
        root = self._root(name)
        if root in self.claimed:
            return self.claimed[root]
        self.claimed[root] = owner
        return None

    def _is_weight(self, name: str) -> bool:
        return name not in self.live and self.shapes.get(name) is not None

    def _learned_sources(self, name: str) -> list[str]:
        """The float initializers (more than one element) whose values reach the constant `name`
        unchanged: through views, Expand, Tile, Slice, Concat and table lookups (a learned position
        table gathered by constant positions, a class token expanded over the batch). Values that
        pass through arithmetic (rotary caches computed from inv_freq, masks) are derived buffers."""
        sources, stack, seen = [], [name], set()
        while stack:
            current = stack.pop()
            if current in seen:
                continue
            seen.add(current)
            t = self.initializers.get(current)
            if t is not None:
                if t.data_type in FLOAT_TYPES and math.prod(t.dims) > 1:
                    sources.append(current)
                continue
            node = self.const_producer.get(current)
            if node is None or node.op_type not in VALUE_PRESERVING:
                continue
            stack.extend(n for n in node.input[:None if node.op_type == "Concat" else 1] if n)
        return sources

    def _is_mask(self, name: str) -> bool:
        """An additive attention mask: 0 where attending, a huge negative number elsewhere (only
        decidable when the file holds the values)."""
        t = self.initializers[name]
        if not (t.raw_data or t.float_data):
            return False
        values = self.onnx.numpy_helper.to_array(t)
        return bool(((values == 0) | (values <= -1e4)).all() and (values <= -1e4).any())

    def _params(self, names, masks_excluded: bool = False) -> int:
        total = 0
        for n in names:
            for source in self._learned_sources(n):
                if masks_excluded and self._is_mask(source):
                    continue
                if self._claim(source, "opaque") is None:
                    total += math.prod(self.initializers[source].dims)
        return total

    def _activations(self, node) -> list[Tensor]:
        return [self.tensors[n] for n in self._data_inputs(node) if n in self.tensors]

    def _emit(self, node, op_type: OpType, inputs, attrs: dict, name: str) -> None:
        outs = self.b.add(op_type, tuple(inputs), attrs, name)
        onnx_outs = [o for o in node.output if o]
        for onnx_name, ours in zip(onnx_outs, outs):
            expected = self.shape(onnx_name, f"node {name!r}")
            if tuple(ours.shape) != tuple(expected):
                raise InputError(f"node {name!r} ({node.op_type}) mapped to {op_type.value} gives shape {ours.shape}, "
                                 f"ONNX infers {expected}", self.where)
            self.tensors[onnx_name] = ours

    def _opaque(self, node, name: str, flops: float, params: int) -> None:
        shapes = tuple(self.shape(o, f"node {name!r}") for o in node.output if o)
        attrs = {"output_shapes": shapes, "flops": float(flops), "params": int(params), "onnx_op": node.op_type}
        self._emit(node, OpType.PROFILED, self._activations(node), attrs, name)

    # --- mapping -----------------------------------------------------------------------------
    def _attention(self, node, index: int, match) -> None:
        scope = node.name.rsplit("/", 1)[0] if "/" in node.name.strip("/") else ""
        label = self._unique(f"{scope}/attention" if scope else f"attention_{index}")
        attrs = {"heads": match.heads}
        if match.kv_heads != match.heads:
            attrs["kv_heads"] = match.kv_heads
        self._emit(node, OpType.ATTENTION, [self.tensors[t] for t in (match.q, match.k, match.v)], attrs, label)

    def _import(self, node, index: int) -> None:
        t = node.op_type
        label = self._unique(node.name or f"{t}_{index}")
        if node.output[0] in self.folded:  # the bias Add of a Linear: alias its output
            self.tensors[node.output[0]] = self.tensors[self.folded.pop(node.output[0])]
            return
        if t in ALIASES:
            self.tensors[node.output[0]] = self._activations(node)[0]
            return
        acts = self._activations(node)
        consts = [n for n in node.input if n and n not in self.tensors]
        attrs = self._attrs(node)
        handler = getattr(self, f"_map_{t}", None)
        if handler is not None:
            handler(node, label, acts, consts, attrs)
        elif t in UNARY:
            self._emit(node, OpType.UNARY, acts[:1], {"kind": UNARY[t]}, label)
        elif t in BINARY:
            self._binary(node, label, acts, consts)
        elif t in RESHAPES:
            self._emit(node, OpType.RESHAPE, acts[:1], {"shape": self.shape(node.output[0], label)}, label)
        elif t in DATA_MOVEMENT:  # constant inputs here are indices, masks or caches, not parameters
            self._opaque(node, label, 0, 0)
        elif t in REDUCTIONS:
            self._opaque(node, label, math.prod(self.shape(node.input[0], label)), 0)
        else:  # unknown, allowed by opaque=1
            out = sum(math.prod(self.shape(o, label)) for o in node.output if o)
            self._opaque(node, label, out, self._params(consts))

    def _binary(self, node, label, acts, consts) -> None:
        out = self.shape(node.output[0], label)
        if len(acts) == 2:
            a, b = acts
            if tuple(a.shape) != out:
                a, b = b, a
            if tuple(a.shape) == out:
                self._emit(node, OpType.BINARY, (a, b), {"kind": BINARY[node.op_type]}, label)
                return
            self._opaque(node, label, math.prod(out), 0)  # mutual broadcast: no Binary counterpart
            return
        # a learned per-feature vector (a decomposed norm's scale or shift, an unfused bias) is a
        # parameter; so is a learned table added to the activations (position embeddings: GPT-2's
        # wpe, BERT's position and token-type tables, ViT's pos_embedding); other higher-rank
        # constants (rotary cos/sin caches multiplied in, additive masks) are buffers
        additive = node.op_type in ("Add", "Sub")
        params = self._params([c for c in consts if additive or len(self.shapes.get(c) or ()) == 1],
                              masks_excluded=True)
        if params or tuple(acts[0].shape) != out:
            self._opaque(node, label, math.prod(out), params)
        else:
            self._emit(node, OpType.UNARY, acts, {"kind": "scale"}, label)

    def _linear(self, node, label, x: Tensor, weight: str, in_f: int, out_f: int, bias_names: list[str]) -> None:
        attrs = {"in_features": in_f, "out_features": out_f, "bias": bool(bias_names)}
        owner = self._claim(weight, label)
        if owner is not None:
            attrs["tied_to"] = owner  # a shared weight (tied embedding) is counted once
        self._emit(node, OpType.LINEAR, (x,), attrs, label)

    def _map_Gemm(self, node, label, acts, consts, attrs) -> None:
        if attrs.get("transA", 0) or len(acts) != 1 or not self._is_weight(node.input[1]):
            raise InputError(f"node {label!r}: Gemm is supported with one activation input and a constant weight "
                             "(no transA)", self.where)
        w = self.shape(node.input[1], label)
        in_f, out_f = (w[1], w[0]) if attrs.get("transB", 0) else (w[0], w[1])
        bias = [n for n in node.input[2:3] if n]
        if bias and math.prod(self.shape(bias[0], label)) not in (out_f,):
            raise InputError(f"node {label!r}: Gemm bias {bias[0]!r} is not a vector of {out_f}", self.where)
        self._linear(node, label, acts[0], node.input[1], in_f, out_f, bias)

    def _map_MatMul(self, node, label, acts, consts, attrs) -> None:
        if len(acts) == 2:
            self._emit(node, OpType.MATMUL, acts, {}, label)
            return
        if node.input[0] not in self.tensors or not self._is_weight(node.input[1]) \
                or len(self.shape(node.input[1], label)) != 2:
            raise InputError(f"node {label!r}: MatMul needs an activation times a constant 2-D weight, "
                             "or two activations", self.where)
        in_f, out_f = self.shape(node.input[1], label)
        bias = self._bias_add(node.output[0], out_f)
        if bias is not None:
            self.folded[bias.output[0]] = node.output[0]
        self._linear(node, label, acts[0], node.input[1], in_f, out_f, [bias.output[0]] if bias is not None else [])

    def _bias_add(self, output: str, width: int):
        """The Add that adds a constant vector of `width` to `output`, when it is the only consumer."""
        users = self.consumers.get(output, [])
        if len(users) != 1 or users[0].op_type != "Add":
            return None
        other = [n for n in users[0].input if n != output]
        if len(other) == 1 and other[0] in self.initializers and tuple(self.shapes[other[0]]) == (width,):
            return users[0]
        return None

    def _map_Conv(self, node, label, acts, consts, attrs) -> None:
        w = self.shape(node.input[1], label) if self._is_weight(node.input[1]) else None
        if w is None or len(w) != 4 or len(acts) != 1:
            raise InputError(f"node {label!r}: only 2-D Conv with a constant weight is supported", self.where)
        if any(d != 1 for d in attrs.get("dilations", (1, 1))):
            raise InputError(f"node {label!r}: dilated Conv is not supported", self.where)
        stride, padding = self._window(label, attrs, (w[2], w[3]))
        group = attrs.get("group", 1)
        self._emit(node, OpType.CONV2D, acts, {
            "in_channels": w[1] * group, "out_channels": w[0], "kernel": (w[2], w[3]), "stride": stride,
            "padding": padding, "groups": group, "bias": len([n for n in node.input[2:3] if n]) == 1}, label)

    def _window(self, label, attrs, kernel) -> tuple[tuple[int, int], tuple[int, int]]:
        pads = tuple(attrs.get("pads", (0, 0, 0, 0)))
        if attrs.get("auto_pad", b"NOTSET") not in (b"NOTSET", "NOTSET", b"VALID", "VALID"):
            raise InputError(f"node {label!r}: auto_pad SAME is not supported (export explicit pads)", self.where)
        if len(pads) != 4 or pads[:2] != pads[2:]:
            raise InputError(f"node {label!r}: asymmetric padding {pads} is not supported", self.where)
        if attrs.get("ceil_mode", 0):
            raise InputError(f"node {label!r}: ceil_mode pooling is not supported", self.where)
        return tuple(attrs.get("strides", (1, 1))), (pads[0], pads[1])

    def _map_pool(self, node, label, acts, attrs, kind: str) -> None:
        kernel = tuple(attrs["kernel_shape"])
        stride, padding = self._window(label, attrs, kernel)
        self._emit(node, OpType.POOL2D, acts, {"kind": kind, "global_pool": False, "kernel": kernel,
                                               "stride": stride, "padding": padding}, label)

    def _map_MaxPool(self, node, label, acts, consts, attrs) -> None:
        self._map_pool(node, label, acts, attrs, "max")

    def _map_AveragePool(self, node, label, acts, consts, attrs) -> None:
        self._map_pool(node, label, acts, attrs, "avg")

    def _map_GlobalAveragePool(self, node, label, acts, consts, attrs) -> None:
        self._emit(node, OpType.POOL2D, acts, {"kind": "avg", "global_pool": True}, label)

    def _map_GlobalMaxPool(self, node, label, acts, consts, attrs) -> None:
        self._emit(node, OpType.POOL2D, acts, {"kind": "max", "global_pool": True}, label)

    def _map_BatchNormalization(self, node, label, acts, consts, attrs) -> None:
        self._emit(node, OpType.BATCHNORM, acts, {}, label)  # mean and variance are buffers, not parameters

    def _map_LayerNormalization(self, node, label, acts, consts, attrs) -> None:
        rank = len(acts[0].shape)
        if attrs.get("axis", -1) % rank != rank - 1:
            self._opaque(node, label, 5 * math.prod(acts[0].shape), self._params(consts))
            return
        has_bias = len([n for n in node.input[2:3] if n]) == 1
        self._emit(node, OpType.LAYERNORM, acts[:1], {} if has_bias else {"rms": True}, label)

    def _map_SimplifiedLayerNormalization(self, node, label, acts, consts, attrs) -> None:
        self._emit(node, OpType.LAYERNORM, acts[:1], {"rms": True}, label)

    def _map_Softmax(self, node, label, acts, consts, attrs) -> None:
        self._emit(node, OpType.SOFTMAX, acts, {"axis": attrs.get("axis", -1)}, label)

    _map_LogSoftmax = _map_Softmax

    def _map_SoftmaxCrossEntropyLoss(self, node, label, acts, consts, attrs) -> None:
        logits = acts[0]
        if self.shape(node.output[0], label) == (logits.shape[0],):  # reduction "none": one loss per sample
            self._emit(node, OpType.SOFTMAX_CE, acts[:1], {}, label)
        else:  # mean/sum to a scalar: the same 6 FLOPs per logit, as an opaque operator
            self._opaque(node, label, 6 * math.prod(logits.shape), 0)

    def _map_Gather(self, node, label, acts, consts, attrs) -> None:
        table = node.input[0]
        if self._is_weight(table) and len(self.shapes[table]) == 2 and attrs.get("axis", 0) == 0 and acts:
            rows, dim = self.shapes[table]
            attrs = {"num_embeddings": rows, "embedding_dim": dim}
            owner = self._claim(table, label)
            if owner is not None:
                attrs["tied_to"] = owner
            self._emit(node, OpType.EMBEDDING, acts, attrs, label)
        else:
            self._opaque(node, label, 0, self._params(consts))

    def _map_Transpose(self, node, label, acts, consts, attrs) -> None:
        perm = attrs.get("perm", tuple(reversed(range(len(acts[0].shape)))))
        self._emit(node, OpType.TRANSPOSE, acts, {"perm": tuple(perm)}, label)

    def _map_Concat(self, node, label, acts, consts, attrs) -> None:
        if consts:  # constant pieces (e.g. a class token) have no place in Concat's inputs
            self._opaque(node, label, 0, self._params(consts))
            return
        rank = len(acts[0].shape)
        self._emit(node, OpType.CONCAT, acts, {"axis": attrs["axis"] % rank}, label)

    def _map_Split(self, node, label, acts, consts, attrs) -> None:
        rank = len(acts[0].shape)
        axis = attrs.get("axis", 0) % rank
        sizes = tuple(self.shape(o, label)[axis] for o in node.output)
        self._emit(node, OpType.SPLIT, acts, {"axis": axis, "sizes": sizes}, label)
