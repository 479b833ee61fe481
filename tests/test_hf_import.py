"""Hugging Face config.json import: parameter counts against the published sizes (data/hf-configs/
published.json, with sources), grouped-query attention, mixture of experts, options and bad input."""
from __future__ import annotations

import json
import math

import pytest

from solver_plan.data import data_dir
from solver_plan.errors import InputError
from solver_plan.graph.importers.hf import load_hf_config
from solver_plan.graph.ops import OpType
from solver_plan.graph.resolve import resolve_model

CONFIGS = data_dir() / "hf-configs"
PUBLISHED = {k: v for k, v in json.loads((CONFIGS / "published.json").read_text()).items() if not k.startswith("_")}
SMALL = {"batch": "1", "seq": "64"}  # shapes do not change parameter counts; small graphs build fast


@pytest.mark.parametrize("name", sorted(PUBLISHED))
def test_parameter_count_matches_published(name):
    ref = PUBLISHED[name]
    graph = load_hf_config(CONFIGS / f"{name}.json", SMALL)
    assert graph.total_params == ref["exact"] - ref["omitted"]
    # the exact count is the paper's / model card's size, rounded as they round it
    assert abs(ref["exact"] - ref["nominal"]) / ref["nominal"] < 0.05


def test_grouped_query_attention_shapes():
    graph = load_hf_config(CONFIGS / "llama-3-8b.json", {"batch": "2", "seq": "16", "layers": "1"})
    attention = graph.op("layers.0/self_attn/attention")
    assert attention.attr("heads") == 32 and attention.attr("kv_heads") == 8
    assert graph.op("layers.0/self_attn/k_proj").output.shape == (2, 16, 8 * 128)
    assert graph.op("layers.0/self_attn/q_proj").output.shape == (2, 16, 32 * 128)


def test_mixtral_experts_and_active_parameters():
    """Experts are one grouped convolution per projection whose weight dimension is the expert
    count; FLOPs per token of the weight-bearing layers = 2 x active parameters, and Mixtral's
    paper gives 13B active (12.9B: embedding lookups are not multiplications)."""
    batch, seq = 1, 64
    graph = load_hf_config(CONFIGS / "mixtral-8x7b-v0.1.json", {"batch": str(batch), "seq": str(seq)})
    up = graph.op("layers.0/block_sparse_moe/experts_gate_up")
    assert up.op_type == OpType.CONV2D and up.attr("groups") == 8
    assert up.params == 8 * 2 * 14336 * 4096
    dense = sum(op.flops for op in graph if op.op_type in (OpType.LINEAR, OpType.CONV2D))
    active = dense / (2 * batch * seq)
    assert abs(active - PUBLISHED["mixtral-8x7b-v0.1"]["active_nominal"]) / 13e9 < 0.03


def test_moe_sequence_must_spread_over_experts():
    with pytest.raises(InputError, match=r"mixtral-8x7b-v0.1.json.*'seq' \(3\)"):
        load_hf_config(CONFIGS / "mixtral-8x7b-v0.1.json", {"batch": "1", "seq": "3", "layers": "1"})


def test_resolve_forms_and_options():
    a = resolve_model(f"{CONFIGS / 'gpt2.json'}:batch=2,seq=32,layers=2")
    b = resolve_model(f"hf:{CONFIGS / 'gpt2.json'}:batch=2,seq=32,layers=2")
    assert a.total_params == b.total_params
    assert a.op("tokens").output.shape == (2, 32)
    zoo = resolve_model("gpt2:batch=2,seq=32,layers=2")
    assert (a.total_params, a.total_flops) == (zoo.total_params, zoo.total_flops)


def test_t5_defaults_and_tied_head():
    graph = load_hf_config(CONFIGS / "t5-small.json", {"batch": "2", "layers": "1"})
    assert graph.op("tokens").output.shape == (2, 512)
    assert graph.op("lm_head").params == 0  # tied to the shared embedding


def test_llama_flops_per_token_close_to_6n_rule():
    """Training FLOPs ~ 6 x parameters per token for short sequences (Kaplan et al. 2020)."""
    graph = load_hf_config(CONFIGS / "llama-2-7b.json", {"batch": "1", "seq": "128"})
    per_token = 3 * graph.total_flops / 128
    assert math.isclose(per_token / (6 * graph.total_params), 1.0, rel_tol=0.05)


@pytest.mark.parametrize("edit, message", [
    (lambda c: c.pop("hidden_size"), "missing key 'hidden_size'"),
    (lambda c: c.update(model_type="falcon"), "model_type 'falcon' is not supported"),
    (lambda c: c.update(num_key_value_heads=5), "'num_attention_heads' \\(32\\) must be a multiple"),
    (lambda c: c.update(intermediate_size="big"), "key 'intermediate_size' must be an integer from 1"),
    (lambda c: c.update(num_hidden_layers=10**9), "key 'num_hidden_layers' must be an integer from 1 to 1024"),
    (lambda c: c.update(num_key_value_heads=None), "key 'num_key_value_heads' must be an integer"),
])
def test_bad_config_names_file_and_key(tmp_path, edit, message):
    config = json.loads((CONFIGS / "llama-2-7b.json").read_text())
    edit(config)
    path = tmp_path / "config.json"
    path.write_text(json.dumps(config))
    with pytest.raises(InputError, match=f"config.json.*{message}"):
        load_hf_config(path, SMALL)


def test_job_files_take_model_files_next_to_them(tmp_path):
    """A batch job names a config.json relative to the job file, with options and the hf: prefix;
    the file's digest is part of the job (an edited config reruns)."""
    from solver_plan.batch.jobfile import load_jobs
    (tmp_path / "cfg").mkdir()
    (tmp_path / "cfg" / "gpt2.json").write_text((CONFIGS / "gpt2.json").read_text())
    jobs = tmp_path / "jobs.yaml"
    jobs.write_text('jobs:\n  - name: byo\n    models: ["cfg/gpt2.json:layers=1,seq=32,batch=2", "hf:cfg/gpt2.json"]\n'
                    "    clusters: [v100x8-nvlink]\n    devices: [2]\n    planners: [greedy]\n")
    loaded = load_jobs(jobs)
    assert [j.model for j in loaded] == [f"{tmp_path}/cfg/gpt2.json:layers=1,seq=32,batch=2",
                                         f"hf:{tmp_path}/cfg/gpt2.json"]
    assert all(j.fingerprints and j.fingerprints[0][1] for j in loaded)


def test_expert_parallelism_is_a_dimension_of_the_expert_layers():
    """The experts' grouped convolution offers `out_channel` (size experts x width) as a weight
    dimension split together with its input channels: a degree dividing the expert count keeps
    whole experts on each device (expert parallelism)."""
    from solver_plan.cost.dims import op_layout
    graph = load_hf_config(CONFIGS / "mixtral-8x7b-v0.1.json", {"batch": "2", "seq": "16", "layers": "1"})
    op = graph.op("layers.0/block_sparse_moe/experts_down")
    layout = op_layout(op, graph)
    dim = next(d for d in layout.dims if d.name == "out_channel")
    assert dim.kind == "parameter" and dim.size == 8 * 4096 and "out_channel" in layout.weight_dims
    index = layout.names.index("out_channel")
    assert layout.input_axes[0][index] == 1  # the input's channels (expert x ffn) split with it
    assert op.params == 8 * 14336 * 4096


def test_model_folder_with_hf_prefix(tmp_path):
    """`hf:FOLDER` reads FOLDER/config.json, as a downloaded model repository holds it."""
    folder = tmp_path / "Llama-2-7b-hf"
    folder.mkdir()
    (folder / "config.json").write_text((CONFIGS / "llama-2-7b.json").read_text())
    graph = resolve_model(f"hf:{folder}:layers=1,seq=16,batch=1")
    assert graph.name == "Llama-2-7b-hf:layers=1,seq=16,batch=1"
    assert graph.op("tokens").output.shape == (1, 16)
