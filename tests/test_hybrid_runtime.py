"""Runtime profiles in the hybrid model: selection (CLI, job option, plan JSON), attention priced as the
runtime runs it, overlapped data-parallel sync by hand, the validator checking the new terms, known
device tables and the planning margin."""
import json
import math
import warnings
from dataclasses import replace

import pytest

from solver_plan.cli import main
from solver_plan.cluster import resolve_cluster
from solver_plan.cluster.devices import DeviceTableWarning
from solver_plan.cluster.loader import cluster_from_dict
from solver_plan.errors import InputError
from solver_plan.hybrid import evaluate, plan_hybrid
from solver_plan.hybrid import schedule
from solver_plan.hybrid.validate import validate_plan
from solver_plan.runtime import RUNTIMES, resolve_runtime

MODEL = "gpt2:layers=4,hidden=512,heads=8,head_dim=64,ffn=2048,seq=1024,positions=1024,vocab=32000"
CLUSTER = resolve_cluster("h100-4x8-ib", 16)
PINNED = dict(dp=4, tp=2, pp=2, micro_batch_size=1, zero_stage=1, recompute="none")


def test_profiles_name_a_source_for_their_facts():
    assert {"megatron-core", "megatron-2021", "deepspeed", "torchtitan", "nemo"} <= set(RUNTIMES)
    assert resolve_runtime(None).name == "megatron-core"
    for profile in RUNTIMES.values():
        assert profile.sources and all(fact and source for fact, source in profile.sources)
        assert 0 <= profile.memory.fragmentation < 1 and profile.memory.cuda_context > 0
    with pytest.raises(InputError, match="cp_exchange"):
        replace(RUNTIMES["torchtitan"], cp_exchange="ulysses")
    with pytest.raises(InputError, match="unknown runtime"):
        resolve_runtime("megatron-2099")


def test_plan_records_its_runtime_and_the_validator_agrees():
    for name in RUNTIMES:
        r = evaluate(MODEL, CLUSTER, 8, PINNED, memory_limit="none", runtime=name)
        assert r.plan.runtime == name and r.to_dict()["runtime"] == name
        assert validate_plan(r.plan, CLUSTER) == [], name


def test_fused_attention_is_faster_than_megatron_2021s():
    """Same configuration: the unfused attention with dropout moves the s^2 scores through HBM; the
    flash kernel does not, and skips the causal half."""
    old = evaluate(MODEL, CLUSTER, 8, PINNED, memory_limit="none", runtime="megatron-2021")
    new = evaluate(MODEL, CLUSTER, 8, PINNED, memory_limit="none", runtime="megatron-core")
    # per layer: the two runtimes may split the layers differently between the stages
    per_layer = [r.plan.stages[0].block_s / r.plan.stages[0].layers for r in (new, old)]
    assert per_layer[0] < per_layer[1]
    activations = [r.plan.stages[0].memory.activations / r.plan.stages[0].layers for r in (new, old)]
    assert activations[0] < activations[1]


def test_overlapped_gradient_reduce_by_hand():
    """Megatron-core: the reduce-scatter hides under the last micro-batch's backward except the last
    bucket; the all-gather under the first forward except the first; with slack, less."""
    parts = schedule.SyncParts(grad_s=1.0, gather_s=0.6, pieces=4)
    core = resolve_runtime("megatron-core")
    # communication-bound: everything but what the first 3 of 4 pieces' compute covers
    assert schedule.exposed_sync_s(parts, 8, forward_s=0.3, backward_s=0.5, runtime=core) == pytest.approx(
        (1.0 - 0.5 * 3 / 4) + (0.6 - 0.3 * 3 / 4))
    assert schedule.exposed_sync_s(parts, 8, forward_s=5.0, backward_s=5.0, runtime=core) == pytest.approx(
        1.0 / 4 + 0.6 / 4)  # only the last (first) bucket is exposed
    assert schedule.exposed_sync_s(parts, 8, 5.0, 5.0, core, slack_forward_s=0.1, slack_backward_s=0.1) == \
        pytest.approx(0.25 - 0.1 + 0.15 - 0.1)
    # Megatron-LM 2021 overlaps nothing
    assert schedule.exposed_sync_s(parts, 8, 5.0, 5.0, resolve_runtime("megatron-2021")) == pytest.approx(1.6)


def test_fsdp_prefetch_by_hand():
    """ZeRO-3 with FSDP2's prefetch: each micro-batch, the forward gather hides under the forward but
    one block's, the backward gather + reduce-scatter under the backward but one block's."""
    parts = schedule.SyncParts(forward_s=0.4, backward_s=0.4 + 0.5, backward_gather_s=0.4, pieces=10)
    titan = resolve_runtime("torchtitan")
    assert schedule.exposed_sync_s(parts, 2, forward_s=1.0, backward_s=2.0, runtime=titan) == pytest.approx(
        2 * (0.04 + 0.09))
    assert schedule.exposed_sync_s(parts, 2, 0.1, 0.2, titan) == pytest.approx(
        2 * ((0.4 - 0.1 * 0.9) + (0.9 - 0.2 * 0.9)))
    assert schedule.exposed_sync_s(parts, 2, 1.0, 2.0, resolve_runtime("megatron-2021")) == pytest.approx(2 * 1.3)


def test_overlap_lowers_the_step_and_keeps_the_hidden_part():
    """400M parameters: 10 buckets of 40M (Megatron-core's default), 9 of them hidden."""
    model = "gpt2:layers=8,hidden=2048,heads=16,head_dim=128,ffn=8192,seq=1024,positions=1024,vocab=32000"
    fix = dict(dp=8, tp=1, pp=1, micro_batch_size=1, zero_stage=1, recompute="none")
    old = evaluate(model, CLUSTER, 16, fix, memory_limit="none", runtime="megatron-2021").plan
    new = evaluate(model, CLUSTER, 16, fix, memory_limit="none", runtime="megatron-core").plan
    assert old.terms.dp_sync_hidden_s == 0 and new.terms.dp_sync_hidden_s > 0
    assert new.terms.dp_sync_s < old.terms.dp_sync_s


def test_validator_catches_a_wrong_overlap_or_reserve():
    plan = evaluate(MODEL, CLUSTER, 16, dict(dp=8, tp=1, pp=1, micro_batch_size=1, zero_stage=1),
                    memory_limit="none").plan
    hidden = replace(plan, terms=replace(plan.terms, dp_sync_s=0.0, dp_sync_hidden_s=plan.terms.dp_sync_hidden_s
                                         + plan.terms.dp_sync_s))
    assert any("dp sync" in p for p in validate_plan(hidden, CLUSTER))
    stage = plan.stages[0]
    no_nccl = replace(stage, memory=replace(stage.memory, nccl=0.0))
    assert any("memory" in p for p in validate_plan(replace(plan, stages=(no_nccl,)), CLUSTER))
    other = replace(plan, runtime="megatron-2021")  # priced with overlap, claimed without
    assert validate_plan(other, CLUSTER)


def test_runtime_on_the_command_line_and_in_job_options(tmp_path, capsys):
    out = tmp_path / "plan.json"
    fix = "dp=4,tp=2,pp=2,micro_batch_size=1"
    assert main(["hybrid", "--model", MODEL, "--cluster", "h100-4x8-ib", "--devices", "16", "--batch", "8",
                 "--fix", fix, "--runtime", "torchtitan", "--out", str(out)]) == 0
    plan = json.loads(out.read_text())
    assert plan["runtime"] == "torchtitan" and "dp_sync_hidden" in plan["step_terms_s"]
    assert {"allocated", "reserved", "cuda_context", "nccl"} <= set(plan["stages"][0]["memory_bytes"])
    assert main(["hybrid", "--model", MODEL, "--cluster", "h100-4x8-ib", "--batch", "8", "--runtime", "jax"]) == 2
    assert "--runtime" in capsys.readouterr().err
    from solver_plan.planners import get_planner
    info = get_planner("hybrid", "hybrid")
    info.check_options({"batch": 8, "runtime": "nemo"})
    with pytest.raises(InputError, match="runtime"):
        info.check_options({"batch": 8, "runtime": "nemo2"})


def test_fp8_needs_a_runtime_with_fp8_gemms():
    with pytest.raises(InputError, match="fp8"):
        evaluate(MODEL, CLUSTER, 8, PINNED, memory_limit="none", runtime="megatron-2021", precision="fp8")


def test_device_limit_keeps_a_margin():
    r = plan_hybrid(MODEL, CLUSTER, 16, time_limit=None, fix={"pp": 1, "tp": 1})
    assert r.plan.memory_limit == pytest.approx(CLUSTER.device.memory * 0.95)


def test_known_device_tables_are_inherited_and_missing_ones_warned():
    links = {"intra_node": {"bandwidth": "300GB/s"}}
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        a100 = cluster_from_dict({"name": "x", "devices_per_node": 8, "links": links,
                                  "device": {"name": "A100-SXM-80GB", "peak_flops": "312TFLOPS", "memory": "80GB"}})
    assert a100.device.matrix_efficiency and a100.device.hbm_bandwidth == pytest.approx(2039e9)
    assert dict(a100.device.attention_efficiency)["flash2"] == ((0.0, 0.6),)  # one figure: a flat curve
    own = cluster_from_dict({"name": "x", "devices_per_node": 8, "links": links,
                             "device": {"name": "h100", "memory": "94GB", "hbm_bandwidth": "3900GB/s"}})
    assert own.device.memory == pytest.approx(94e9) and own.device.hbm_bandwidth == pytest.approx(3900e9)
    assert own.device.peak("bf16") == pytest.approx(989e12)  # inherited under the YAML's own keys
    with pytest.warns(DeviceTableWarning, match="matrix_efficiency"):
        cluster_from_dict({"name": "y", "devices_per_node": 8, "links": links,
                           "device": {"name": "NewChip", "peak_flops": "100TFLOPS", "memory": "64GB"}})


@pytest.mark.parametrize("preset", ["h200-8x8-ib", "b200-8x8-ib", "gb200-nvl72", "mi300x-8x8"])
def test_new_presets_plan(preset):
    cluster = resolve_cluster(preset)
    assert cluster.device.matrix_efficiency and cluster.device.hbm_bandwidth
    assert cluster.inter_node.nics_per_node == cluster.devices_per_node  # one NIC per GPU as built
    r = evaluate(MODEL, cluster, 8, dict(dp=4, tp=2, pp=1, micro_batch_size=2), memory_limit="device")
    assert r.step_time_s and math.isfinite(r.step_time_s) and validate_plan(r.plan, cluster.first_devices(8)) == []


def test_nvl72_keeps_a_72_way_tensor_split_on_nvlink():
    cluster = resolve_cluster("gb200-nvl72")
    assert cluster.devices_per_node == 72
    assert cluster.level(0, 71).name == "INTRA_NODE" and cluster.level(0, 72).name == "INTER_NODE"


@pytest.mark.parametrize("bandwidth", [1e10, 1e13])  # communication-bound, compute-bound
def test_closed_form_agrees_with_the_simulator(bandwidth):
    """Data parallelism of 8 equal layers on 2 devices: the per-operator simulator starts each layer's
    ring all-reduce after its backward task, one after another on the link; the hybrid closed form
    (`schedule.hidden_behind`) gives the time left after the backward pass."""
    from solver_plan.cluster import Cluster, DeviceSpec, Link
    from solver_plan.graph.resolve import resolve_model
    from solver_plan.intra.solve import solve
    from solver_plan.planning import prepare_problem
    from solver_plan.simulate import simulate_strategy

    graph = resolve_model("mlp:layers=8,hidden=2048,batch=256")
    cluster = Cluster("t", 1, 2, DeviceSpec("dev", 1e13, 16e9), Link(bandwidth, 1e-6))
    problem, cost_model = prepare_problem(graph, cluster, None)
    plan = solve(problem, "data-parallel").assignment
    strategy = {problem.names[i]: problem.candidates[i][c] for i, c in enumerate(plan)}
    sim = simulate_strategy(graph, cluster, strategy, cost_model)
    backward = [t for t in sim.tasks if t.category == "backward"]
    start, end = min(t.start for t in backward), max(t.end for t in backward)
    layers = [op for op in graph.operators if op.params]
    comm = sum(cost_model.node(graph, op, strategy[op.name]).sync_s for op in layers)
    exposed = schedule.hidden_behind(comm, end - start, len(layers))
    assert sim.iteration_s - end == pytest.approx(exposed, rel=0.01)
