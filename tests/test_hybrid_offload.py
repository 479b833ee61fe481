"""Optimizer-state offloading in hybrid plans (hybrid/offload.py, issue 23): memory and time by hand on
a tiny case, the node's host memory, pins and refusals, and a brute force over a tiny space with the
offload choice equal to the search."""
import itertools
from dataclasses import replace

import pytest

from solver_plan.cluster import resolve_cluster
from solver_plan.cluster.model import Host
from solver_plan.errors import InputError
from solver_plan.hybrid import evaluate, plan_hybrid
from solver_plan.hybrid.evaluate import Context, price
from solver_plan.hybrid.memory import precision_state, runtime_state, stage_params
from solver_plan.hybrid.model import transformer_spec
from solver_plan.hybrid.space import Parallelism, parse_fix
from solver_plan.hybrid.stage_cost import BlockCoster
from solver_plan.hybrid.validate import plan_precision
from solver_plan.result import Status
from solver_plan.runtime import RUNTIMES

CLUSTER = resolve_cluster("h100-80gb-superpod", 16)  # 2 DGX nodes: host 2 TB, 64 GB/s per device
SMALL = "gpt2:layers=4,hidden=512,heads=8,head_dim=64,ffn=2048,seq=512,positions=512,vocab=32000"


def _plan(offload, runtime="megatron-core", cluster=CLUSTER, **extra):
    fix = {"dp": 2, "tp": 2, "pp": 4, "micro_batch_size": 1, "zero_stage": 1, "offload": offload, **extra}
    return evaluate(SMALL, cluster, 16, fix, memory_limit="none", runtime=runtime)


def test_memory_and_time_by_hand():
    off, on = _plan("none"), _plan("optimizer")
    assert on.status == Status.FEASIBLE and "agree" in on.notes[-1]  # the validator re-derived it
    spec = transformer_spec(SMALL)
    # megatron-core in bf16: fp32 main gradients (4 B) and optimizer state (12 B) per parameter
    state = runtime_state(precision_state(plan_precision(on.plan, CLUSTER)), RUNTIMES["megatron-core"])
    assert (state.gradients, state.optimizer, state.weights) == (4.0, 12.0, 2.0)
    stage = on.plan.stages[1]  # one block, tp 2, ZeRO-1 over dp 2
    local = stage_params(spec, 1, False, False, 2, 4) / 2
    assert local == pytest.approx(spec.block_params / 4)
    assert stage.memory.optimizer == 0.0 and stage.memory.host == pytest.approx(local * (12 + 4))
    # the device saves exactly its optimizer shard
    assert off.plan.stages[1].memory.total - stage.memory.total == pytest.approx(off.plan.stages[1].memory.optimizer)
    # the step: gradients down (4 B), host Adam (0.92 ns), weights up (2 B); the largest stage holds the
    # embedding or the output layer, each stage's gradients are one bucket (< 40M parameters), so
    # down + cpu + up for its parameters
    largest = max(stage_params(spec, s.layers, s.embedding, s.head, 2, 4) for s in on.plan.stages) / 2
    expected = largest * (4 / 64e9 + 0.92e-9 + 2 / 64e9)
    assert on.plan.terms.optimizer_s == pytest.approx(expected)
    d = on.to_dict()
    assert d["parallelism"]["offload"] == "optimizer" and d["stages"][1]["memory_bytes"]["host"] > 0


def test_host_memory_per_node_limits_it():
    small_host = replace(CLUSTER, host=replace(CLUSTER.host, memory_per_node=1e6))  # 1 MB a node
    result = _plan("optimizer", cluster=small_host)
    assert result.status == Status.INFEASIBLE and result.plan is None


def test_pins_and_refusals():
    assert parse_fix("offload=optimizer") == {"offload": "optimizer"}
    assert parse_fix("offload=activations") == {"offload": "activations"}
    with pytest.raises(InputError, match="offload"):
        parse_fix("offload=disk")
    with pytest.raises(InputError, match="pp 1"):
        Parallelism(2, 2, 4, 1, 8, zero_stage=1, offload="activations")  # Megatron-core: no pipelining
    with pytest.raises(InputError, match="recompute"):
        Parallelism(16, 1, 1, 1, 1, recompute="selective", offload="activations")
    with pytest.raises(InputError, match="zero_stage"):
        Parallelism(2, 2, 4, 1, 8, offload="optimizer")  # ZeRO-0: no optimizer shard to offload
    with pytest.raises(InputError, match="--fix offload"):
        _plan("optimizer", runtime="torchtitan")
    with pytest.raises(InputError, match="host section"):
        _plan("optimizer", cluster=replace(CLUSTER, host=None))


def test_host_optimizer_rate_from_the_cluster_file():
    from solver_plan.cluster.loader import cluster_from_dict
    import yaml

    data = yaml.safe_load(open("configs/clusters/h100-80gb-superpod.yaml"))
    data["host"]["optimizer_ns_per_param"] = 2.0
    cluster = cluster_from_dict(data, "c.yaml")
    assert cluster.host.optimizer_s_per_param == pytest.approx(2e-9)
    assert Host(1e12, 5e10).optimizer_s_per_param == pytest.approx(0.92e-9)  # measured default
    data["host"]["optimizer_ns_per_param"] = "fast"
    with pytest.raises(InputError, match="optimizer_ns_per_param"):
        cluster_from_dict(data, "c.yaml")


# DeepSpeed's kernels with nothing overlapped (its ZeRO-1/2 overlap nothing already; no ZeRO-3 prefetch),
# so each stage's time is its own and a brute force over every cut is exact
SPEED = RUNTIMES["deepspeed"]
NO_OVERLAP = replace(SPEED, overlap=replace(SPEED.overlap, grad_reduce=False, param_gather=False,
                                            sharded_prefetch=False, pp_p2p=False))


def _brute(cluster, batch):
    from solver_plan.hybrid.memory import state_bytes

    spec = transformer_spec(SMALL)
    ctx = Context(spec, cluster, batch, None, runtime_state(state_bytes(cluster.device), NO_OVERLAP),
                  precision="mixed-bf16", runtime=NO_OVERLAP)
    coster = BlockCoster(spec, cluster, runtime=NO_OVERLAP)
    n, L, per_node = cluster.num_devices, spec.layers, cluster.devices_per_node
    plans = []
    for tp, pp in itertools.product((1, 2, 4, 8), range(1, L + 1)):
        if n % (tp * pp):
            continue
        dp = n // (tp * pp)
        for b in (d for d in range(1, batch // dp + 1) if batch % (dp * d) == 0):
            m = batch // (dp * b)
            schedules = [("1f1b", 1)] + ([("gpipe", 1)] + [("interleaved", v) for v in range(2, L // pp + 1)
                                                           if m % pp == 0] if pp > 1 else [])
            for (schedule, v), zero, offload in itertools.product(schedules, range(4), ("none", "optimizer")):
                if (pp > 1 and zero >= 2) or (offload == "optimizer" and zero == 0):
                    continue
                node = per_node // tp
                for shard in [0] + ([node] if zero >= 1 and 1 < node < dp and dp % node == 0 else []):
                    par = Parallelism(dp, tp, pp, b, m, v, "none", zero, False, schedule, 1, shard, offload)
                    profile = coster.profile(tp, b)
                    cuts = (c for c in itertools.product(range(v, L + 1), repeat=pp) if sum(c) == L)
                    for cut in cuts:
                        plan = price(ctx, par, profile, None, layers=cut)
                        if plan is not None:  # None: the node's host memory cannot hold the offloaded state
                            plans.append((plan.step_time_s, plan.memory_per_device_bytes, par))
    return plans


@pytest.mark.parametrize("host_memory", [2e12, 0.3e9])  # a DGX's 2 TB; a host that holds only small shards
def test_planner_equals_brute_force_with_offload(host_memory):
    cluster = replace(CLUSTER, host=replace(CLUSTER.host, memory_per_node=host_memory))
    plans = _brute(cluster, 16)
    offloaded = sum(p.offload == "optimizer" for _, _, p in plans)
    sharded = sum(p.offload == "none" and p.zero_stage >= 1 for _, _, p in plans)
    # every ZeRO >= 1 plan has its offloaded twin while the host holds it; 0.3 GB a node holds only some
    assert (offloaded == sharded) if host_memory > 1e12 else (0 < offloaded < sharded)
    options = {"time_limit": None, "runtime": NO_OVERLAP, "validate": False,
               "fix": {"recompute": "none", "sequence_parallel": False}}
    least = min(m for _, m, _ in plans)
    for limit in (None, least * 1.02):
        result = plan_hybrid(SMALL, cluster, 16, memory_limit=limit or "none", **options)
        fitting = [t for t, m, _ in plans if limit is None or m <= limit]
        assert result.status == Status.OPTIMAL
        assert result.step_time_s == pytest.approx(min(fitting), rel=1e-9)
    # where offloading is what fits: the least memory any plan needs is an offloaded one's
    if host_memory > 1e12:
        assert min(plans, key=lambda p: p[1])[2].offload == "optimizer"


def test_activation_offload_by_hand():
    # pp 1, no recomputation (Megatron-core's CPU offloading): the fewest blocks whose activations go to
    # the host for the device to fit, the device keeping the others and one in transit
    model = "gpt2:layers=8,hidden=1024,heads=16,head_dim=64,ffn=4096,seq=4096,positions=4096,vocab=32000"
    cluster = resolve_cluster("h100-80gb-superpod", 8)
    fix = {"dp": 8, "tp": 1, "pp": 1, "micro_batch_size": 2, "zero_stage": 1}
    base = evaluate(model, cluster, 16, fix, memory_limit="none").plan
    limit = base.memory_per_device_bytes * 0.8
    plan = evaluate(model, cluster, 16, {**fix, "offload": "activations"}, memory_limit=limit)
    assert plan.status == Status.FEASIBLE and "agree" in plan.notes[-1]  # the validator re-derived it
    stage, before = plan.plan.stages[0], base.stages[0]
    spec = transformer_spec(model)
    from solver_plan.hybrid.memory import layer_activation_bytes
    state = runtime_state(precision_state(plan_precision(plan.plan, cluster)), RUNTIMES["megatron-core"])
    a = layer_activation_bytes(spec, 2, 1, "none", False, state, RUNTIMES["megatron-core"])  # one block, b 2
    r = stage.offload_layers
    assert 1 <= r < 8 and stage.memory.host == pytest.approx(r * a)
    # device: r - 1 blocks fewer (one in transit), the reserve's fragmentation share of them too
    saved = (r - 1) * a * (1 + RUNTIMES["megatron-core"].memory.fragmentation)
    assert before.memory.total - stage.memory.total == pytest.approx(saved)
    assert stage.memory.total <= limit < before.memory.total - (r - 2) * a  # r - 1 blocks would not fit
    # time: r a down under the forward and up under the backward, the rest exposed
    copy = r * a / 64e9
    backward = stage.block_s + stage.extra_s - stage.forward_s
    assert stage.offload_s == pytest.approx(max(0, copy - stage.forward_s) + max(0, copy - backward))
    assert plan.plan.step_time_s == pytest.approx(base.step_time_s + stage.offload_s * 1)  # m = 1
    assert plan.to_dict()["stages"][0]["offload_layers"] == r
    # with room to spare nothing is offloaded: the activation mode is the plain point, not priced
    assert evaluate(model, cluster, 16, {**fix, "offload": "activations"}, memory_limit="none").plan is None


# Megatron-core (runs both offloads) with nothing overlapped: stage times are their own
CORE = RUNTIMES["megatron-core"]
CORE_NO_OVERLAP = replace(CORE, overlap=replace(CORE.overlap, grad_reduce=False, param_gather=False,
                                                sharded_prefetch=False, pp_p2p=False))
WIDE = "gpt2:layers=4,hidden=1024,heads=16,head_dim=64,ffn=4096,seq=2048,positions=2048,vocab=32000"


def _brute_activations(cluster, batch, limit):
    """Every point of the pinned space (tp 1, no recomputation, no sequence parallelism) with every
    offload mode, every cut and, offloading activations, every count of offloaded blocks 1 <= r < k:
    (step, memory) of those within `limit` and the nodes' host memory."""
    from solver_plan.hybrid.memory import state_bytes

    spec = transformer_spec(WIDE)
    ctx = Context(spec, cluster, batch, None, runtime_state(state_bytes(cluster.device), CORE_NO_OVERLAP),
                  precision="mixed-bf16", runtime=CORE_NO_OVERLAP)
    profile = BlockCoster(spec, cluster, runtime=CORE_NO_OVERLAP).profile(1, 1)
    n, L = cluster.num_devices, spec.layers
    fits = []
    for pp in (p for p in range(1, L + 1) if n % p == 0):
        dp = n // pp
        for b in (d for d in range(1, batch // dp + 1) if batch % (dp * d) == 0):
            if b != 1:
                continue  # pinned micro-batch size 1
            m = batch // (dp * b)
            schedules = [("1f1b", 1)] + ([("gpipe", 1)] + [("interleaved", v) for v in range(2, L // pp + 1)
                                                           if m % pp == 0] if pp > 1 else [])
            for (schedule, v), zero, offload in itertools.product(schedules, range(4), ("none", "optimizer",
                                                                                      "activations", "both")):
                if (pp > 1 and zero >= 2) or (offload in ("optimizer", "both") and zero == 0):
                    continue
                if offload in ("activations", "both") and pp > 1:
                    continue
                par = Parallelism(dp, 1, pp, b, m, v, "none", zero, False, schedule, 1, 0, offload)
                for cut in (c for c in itertools.product(range(v, L + 1), repeat=pp) if sum(c) == L):
                    counts = [None] if offload in ("none", "optimizer") else [(r,) for r in range(1, L)]
                    for r in counts:
                        plan = price(ctx, par, profile, None, layers=cut, offloaded=r)
                        if plan is not None and plan.memory_per_device_bytes <= limit:
                            fits.append((plan.step_time_s, plan.memory_per_device_bytes, par, r))
    return fits


def test_planner_equals_brute_force_with_activation_offload():
    cluster = resolve_cluster("h100-80gb-superpod", 8)
    options = {"time_limit": None, "runtime": CORE_NO_OVERLAP, "validate": False,
               "fix": {"recompute": "none", "sequence_parallel": False, "tp": 1, "micro_batch_size": 1}}
    free = plan_hybrid(WIDE, cluster, 16, memory_limit="none", **options)
    everything = _brute_activations(cluster, 16, float("inf"))
    least = min(m for _, m, _, _ in everything)
    assert free.step_time_s == pytest.approx(min(t for t, _, _, _ in everything), rel=1e-9)
    # limits between the least memory and the free plan's: activation offload competes with pipelining
    winners = []
    for share in (0.05, 0.3, 0.7):
        limit = least + share * (free.plan.memory_per_device_bytes - least)
        fitting = [f for f in everything if f[1] <= limit]
        result = plan_hybrid(WIDE, cluster, 16, memory_limit=limit, **options)
        assert result.status == Status.OPTIMAL
        assert result.step_time_s == pytest.approx(min(t for t, _, _, _ in fitting), rel=1e-9)
        winners.append(result.plan.parallelism.offload)
    assert winners[0] == "both" and winners[1] == "activations" and winners[2] == "none"
