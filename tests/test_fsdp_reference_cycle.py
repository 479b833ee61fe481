"""Why the kit's FSDP2 32K-vocabulary row read 37.4 GB reserved (data/device/README.md): before
c094fba the kit ran its FSDP2 cases one after another in one process without gc.collect(), and an
FSDP2-sharded model is kept alive by a reference cycle (its modules' hooks and FSDP states refer to
each other), so when its function returns, reference counting alone does not free its parameters:
only Python's cyclic collector does. Reproduced here with torch on CPU (gloo, one rank) the way the
kit built each case; skipped where torch is not installed (the project's own environment)."""
import gc
import os
import weakref

import pytest

torch = pytest.importorskip("torch")


def _case(refs):
    """One FSDP2 case as scripts/measure_device.py measure_fsdp built it: blocks and root sharded,
    AdamW, two steps, then return."""
    import torch.nn as nn
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.fsdp import fully_shard

    mesh = init_device_mesh("cpu", (1,))

    class Block(nn.Module):
        def __init__(self):
            super().__init__()
            self.a, self.b = nn.Linear(32, 32), nn.Linear(32, 32)

        def forward(self, x):
            return x + self.b(torch.relu(self.a(x)))

    class Decoder(nn.Module):
        def __init__(self):
            super().__init__()
            self.embed = nn.Embedding(64, 32)
            self.blocks = nn.ModuleList(Block() for _ in range(2))
            self.output = nn.Linear(32, 64)

        def forward(self, tokens):
            x = self.embed(tokens)
            for block in self.blocks:
                x = block(x)
            return self.output(x)

    model = Decoder()
    for block in model.blocks:
        fully_shard(block, mesh=mesh)
    fully_shard(model, mesh=mesh)
    opt = torch.optim.AdamW(model.parameters(), foreach=True)
    tokens = torch.randint(0, 64, (2, 8))
    for _ in range(2):
        nn.functional.cross_entropy(model(tokens).flatten(0, 1).float(), tokens.flatten()).backward()
        opt.step()
        opt.zero_grad()
    refs.append(weakref.ref(model))


def test_an_fsdp2_model_outlives_its_function_until_the_cyclic_collector_runs():
    import torch.distributed as dist

    if not dist.is_available() or not dist.is_gloo_available():
        pytest.skip("torch without gloo")
    os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
    os.environ.setdefault("MASTER_PORT", "29541")
    started = not dist.is_initialized()
    if started:
        dist.init_process_group("gloo", rank=0, world_size=1)
    refs: list = []
    enabled = gc.isenabled()
    gc.disable()  # reference counting only, as between two cases when no full collection happens to run
    try:
        _case(refs)
        assert refs[0]() is not None  # a reference cycle keeps the model (and its parameters) alive
        gc.collect()
        assert refs[0]() is None  # the cyclic collector frees it: what clean_start now runs first
    finally:
        if enabled:
            gc.enable()
        if started:
            dist.destroy_process_group()
