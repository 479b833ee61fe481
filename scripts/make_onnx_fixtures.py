"""Regenerate tests/fixtures/onnx/: real `torch.onnx.export` files of torchvision and Hugging Face
models (tiny configurations, random weights) and manifest.json, torch's own figures for each file.

    pip install torch torchvision transformers onnx onnxscript
    python scripts/make_onnx_fixtures.py [--out tests/fixtures/onnx]

Each file is exported in training mode (BatchNorm and Dropout kept, as a training planner needs
them; the classic exporter's eval mode would fold BatchNorm into the convolutions). The importer
reads shapes only, so the bytes of parameters over STRIP_ELEMENTS elements are dropped from the
saved file (their names, types and dimensions stay): ResNet-50 is then 140 KB, not 100 MB.

manifest.json, per file: the MODEL options the test passes, torch's parameter count
(`sum(p.numel() for p in model.parameters())`, tied weights once), and an independent forward
FLOP count: torch.utils.flop_counter.FlopCounterMode (2 x multiply-accumulates of every matrix
product and convolution, attention's included, run with the math attention kernel) plus, from
forward hooks, one FLOP per output element of every Linear / Conv2d / GPT-2 Conv1D bias and of
nn.MultiheadAttention's packed projection bias (FlopCounterMode counts addmm's bias free).
"""
from __future__ import annotations

import argparse
import json
import math
from pathlib import Path

STRIP_ELEMENTS = 256


def _tiny_hf(family: str):
    import transformers as tf
    common = dict(attn_implementation="eager")
    if family == "gpt2":
        config = tf.GPT2Config(vocab_size=256, n_positions=32, n_embd=64, n_layer=2, n_head=4)
        return tf.GPT2LMHeadModel._from_config(config, **common)
    if family == "bert":
        config = tf.BertConfig(vocab_size=256, hidden_size=64, num_hidden_layers=2, num_attention_heads=4,
                               intermediate_size=128, max_position_embeddings=32)
        return tf.BertModel._from_config(config, add_pooling_layer=False, **common)
    if family == "llama":
        config = tf.LlamaConfig(vocab_size=256, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                                num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=32,
                                tie_word_embeddings=False)
        return tf.LlamaForCausalLM._from_config(config, **common)
    raise ValueError(family)


class _FirstOutput:
    """Wraps a Hugging Face model so that forward(ids) returns its first output only (no cache)."""

    def __new__(cls, model):
        import torch

        class Wrapped(torch.nn.Module):
            def __init__(self):
                super().__init__()
                self.model = model

            def forward(self, ids):
                mask = torch.ones_like(ids)  # given, so the packed-sequence detection (aten::diff) is skipped
                return self.model(input_ids=ids, attention_mask=mask, use_cache=False, return_dict=False)[0]

        return Wrapped()


def _torchvision(name: str):
    import torchvision.models as tv
    if name == "vit":
        return tv.VisionTransformer(image_size=32, patch_size=8, num_layers=2, num_heads=4, hidden_dim=64,
                                    mlp_dim=128, num_classes=10)
    return getattr(tv, name)(weights=None)


# file stem -> (builder, example input factory, MODEL options for the importer, exporter)
def _cases():
    import torch
    image = lambda size: (lambda: torch.randn(2, 3, size, size))  # noqa: E731
    ids = lambda: torch.randint(0, 256, (2, 16))  # noqa: E731
    return {
        "resnet50": (lambda: _torchvision("resnet50"), image(224), {}, "classic"),
        "mobilenet_v3_small": (lambda: _torchvision("mobilenet_v3_small"), image(224), {}, "classic"),
        "inception_v3": (lambda: _torchvision("inception_v3"), image(299), {}, "classic"),
        "vit_tiny": (lambda: _torchvision("vit"), image(32), {}, "classic"),
        "gpt2_tiny": (lambda: _FirstOutput(_tiny_hf("gpt2")), ids, {}, "classic"),
        "bert_tiny": (lambda: _FirstOutput(_tiny_hf("bert")), ids, {}, "classic"),
        "llama_tiny": (lambda: _FirstOutput(_tiny_hf("llama")), ids, {}, "classic"),
        "gpt2_tiny_dynamo": (lambda: _FirstOutput(_tiny_hf("gpt2")), ids, {}, "dynamo"),
    }


def _independent_flops(model, example) -> float:
    import torch
    from torch.utils.flop_counter import FlopCounterMode
    bias_flops = [0]

    def hook(module, inputs, output):
        if getattr(module, "bias", None) is not None:
            bias_flops[0] += output.numel()

    def attention_hook(module, inputs, output):  # nn.MultiheadAttention's biases (it calls F.linear)
        if module.in_proj_bias is not None:
            bias_flops[0] += sum(x.numel() for x in inputs[:3])
        if module.out_proj.bias is not None:
            bias_flops[0] += output[0].numel()

    kinds = (torch.nn.Linear, torch.nn.Conv2d)
    try:
        from transformers.pytorch_utils import Conv1D
        kinds += (Conv1D,)
    except ImportError:
        pass
    handles = [m.register_forward_hook(hook) for m in model.modules() if isinstance(m, kinds)]
    handles += [m.register_forward_hook(attention_hook) for m in model.modules()
                if isinstance(m, torch.nn.MultiheadAttention)]
    counter = FlopCounterMode(display=False)
    # grad enabled: no inference fast paths (nn.MultiheadAttention's); the math kernel of
    # scaled_dot_product_attention is matrix products the counter sees (not every fused CPU kernel is)
    with counter, torch.nn.attention.sdpa_kernel(torch.nn.attention.SDPBackend.MATH):
        model(example)
    for h in handles:
        h.remove()
    return float(counter.get_total_flops() + bias_flops[0])


def _folded_rows(stem: str, model, example) -> int:
    if not stem.startswith("gpt2") or not stem.endswith("dynamo"):
        return 0
    table = model.model.transformer.wpe.weight
    return (table.shape[0] - example.shape[1]) * table.shape[1]


def _export(model, example, path: Path, exporter: str) -> None:
    import torch
    if exporter == "classic":
        torch.onnx.export(model, (example,), str(path), dynamo=False, opset_version=17,
                          training=torch.onnx.TrainingMode.TRAINING, do_constant_folding=False)
    else:
        program = torch.onnx.export(model, (example,), dynamo=True)
        program.save(str(path))


def _strip(path: Path, state_names: set[str]) -> None:
    """Drop the bytes of large parameters and buffers (exporter-made constants, such as a folded
    attention mask, keep theirs: the importer tells masks from learned tables by their values)."""
    import onnx
    model = onnx.load(str(path))
    for tensor in model.graph.initializer:
        if math.prod(tensor.dims) > STRIP_ELEMENTS and tensor.name in state_names:
            tensor.ClearField("raw_data")
            for field in ("float_data", "int32_data", "int64_data", "double_data"):
                tensor.ClearField(field)
    onnx.save(model, str(path))


def main() -> int:
    import torch
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default=str(Path(__file__).resolve().parents[1] / "tests" / "fixtures" / "onnx"))
    parser.add_argument("--only", nargs="*", help="file stems to regenerate (default: all)")
    args = parser.parse_args()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    manifest_path = out / "manifest.json"
    manifest = json.loads(manifest_path.read_text()) if manifest_path.exists() else {}
    import transformers
    import torchvision
    for stem, (build, make_input, options, exporter) in _cases().items():
        if args.only and stem not in args.only:
            continue
        torch.manual_seed(0)
        model = build()
        model.train()
        with torch.no_grad():  # random weights throughout: zero biases and identical fresh norms would
            for parameter in model.parameters():  # let the dynamo exporter's optimizer drop or merge them
                parameter.normal_(0.0, 0.02)
        example = make_input()
        flops = _independent_flops(model, example)
        path = out / f"{stem}.onnx"
        _export(model, example, path, exporter)
        _strip(path, {name for name, _ in model.named_parameters()} | {name for name, _ in model.named_buffers()})
        manifest[stem] = {"file": path.name, "options": options, "exporter": exporter,
                          "input_shape": list(example.shape),
                          "torch_parameters": sum(p.numel() for p in model.parameters()),
                          "independent_forward_flops": flops,
                          # the dynamo exporter's optimizer folds a lookup at constant positions
                          # (GPT-2's wpe[arange(seq)]) into the rows used: the file holds no more
                          "parameters_folded_by_exporter": _folded_rows(stem, model, example),
                          "versions": {"torch": torch.__version__, "torchvision": torchvision.__version__,
                                       "transformers": transformers.__version__}}
        print(f"{stem}: {path.stat().st_size / 1024:.0f} KB, {manifest[stem]['torch_parameters']} parameters, "
              f"{flops:.4g} forward FLOPs")
    manifest_path.write_text(json.dumps(manifest, indent=1, sort_keys=True) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
