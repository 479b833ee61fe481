"""Execute a hybrid plan's pipeline on CPU processes (gloo) with torch.distributed.pipelining and
compare with one process: the proof that the stage allocation and the planned schedule compute
the model's loss and gradients.

`run_pipeline_plan(plan_dict, width=16, vocab=32, seq=8)` builds a small stand-in of the planned
model with the plan's layer count (token embedding, `layers` residual MLP blocks, final norm and
output: what Megatron-LM, DeepSpeed and torchtitan put in pipeline stages), cuts it as the plan's
stages say (the embedding with the first stage, the output with the last; with virtual stages the
plan's blocks per virtual stage, `chunk_layers`, part i on rank i mod pp; ZB-V's parts i and
2 pp - 1 - i on rank i), and runs one training step of the plan's global batch with the plan's
schedule (1F1B, GPipe, Interleaved1F1B, ZBVZeroBubble, and zb-exact's schedule CSV loaded into
_PipelineScheduleRuntime as torchtitan loads it: export/schedule_csv.py) and micro-batch count on pp
gloo processes. Only the pipeline dimension runs (data and tensor
parallelism are the other exports' business); float64 throughout. Returns the largest absolute
differences of the loss and of any parameter's gradient from one process running the whole
batch. Needs torch.
"""
from __future__ import annotations

import json
import os
import tempfile

from solver_plan.errors import InputError
from solver_plan.export.common import hybrid_view


def _model(layers: int, width: int, vocab: int, seed: int):
    import torch
    from torch import nn

    class Block(nn.Module):
        def __init__(self):
            super().__init__()
            self.norm = nn.LayerNorm(width)
            self.up, self.down = nn.Linear(width, 2 * width), nn.Linear(2 * width, width)

        def forward(self, x):
            return x + self.down(torch.nn.functional.gelu(self.up(self.norm(x))))

    torch.manual_seed(seed)
    model = nn.ModuleDict({"tok_embeddings": nn.Embedding(vocab, width),
                           "layers": nn.ModuleList(Block() for _ in range(layers)),
                           "norm": nn.LayerNorm(width), "lm_head": nn.Linear(width, vocab)})
    return model.double()


class _Part:
    """The modules of one pipeline part, as a torch module (first part embeds, last projects)."""

    def __new__(cls, model, first: int, last: int, is_first: bool, is_last: bool):
        from torch import nn

        class Part(nn.Module):
            def __init__(self):
                super().__init__()
                self.embed = model["tok_embeddings"] if is_first else None
                self.blocks = nn.ModuleList(model["layers"][i] for i in range(first, last))
                self.head = nn.Sequential(model["norm"], model["lm_head"]) if is_last else None

            def forward(self, x):
                if self.embed is not None:
                    x = self.embed(x)
                for block in self.blocks:
                    x = block(x)
                return self.head(x) if self.head is not None else x

        return Part()


def _part_layers(v) -> list[tuple[int, int]]:
    sizes = list(v.stage_layers) if v.virtual_stages == 1 else v.virtual_stage_layers()[0]
    bounds, first = [], 0
    for size in sizes:
        bounds.append((first, first + size))
        first += size
    return bounds


def _loss(logits, targets):
    import torch.nn.functional as F
    return F.cross_entropy(logits.flatten(0, 1), targets.flatten())


def _rank_parts(view, rank: int, parts: int) -> list[int]:
    """The model parts rank `rank` runs: i mod pp (looped), or i and 2 pp - 1 - i (ZB-V's V)."""
    if view.schedule == "zb-v":
        return [rank, parts - 1 - rank]
    return [i for i in range(parts) if i % view.pp == rank]


def _schedule(view, stages, csv_path: str | None):
    """The plan's schedule over this rank's stages (a zb-exact plan: its CSV in _PipelineScheduleRuntime)."""
    from torch.distributed.pipelining import (Schedule1F1B, ScheduleGPipe, ScheduleInterleaved1F1B,
                                              ScheduleZBVZeroBubble)
    from torch.distributed.pipelining.schedules import _PipelineScheduleRuntime
    if csv_path is not None:
        schedule = _PipelineScheduleRuntime(stages, view.micro_batches, loss_fn=_loss)
        schedule._load_csv(csv_path)
        return schedule
    if view.schedule == "zb-v":
        return ScheduleZBVZeroBubble(stages, view.micro_batches, loss_fn=_loss)
    if view.virtual_stages > 1:
        return ScheduleInterleaved1F1B(stages, view.micro_batches, loss_fn=_loss)
    kind = ScheduleGPipe if view.schedule == "gpipe" else Schedule1F1B
    return kind(stages[0], view.micro_batches, loss_fn=_loss)


def _worker(rank: int, view, width: int, vocab: int, seq: int, seed: int, init_file: str, result_path: str,
            csv_path: str | None = None):
    import torch
    import torch.distributed as dist
    from torch.distributed.pipelining import PipelineStage
    torch.set_num_threads(1)
    dist.init_process_group("gloo", init_method=f"file://{init_file}", rank=rank, world_size=view.pp)
    try:
        model = _model(view.layers, width, vocab, seed)
        g = torch.Generator().manual_seed(seed + 1)
        batch = view.micro_batch_size * view.micro_batches
        tokens = torch.randint(0, vocab, (batch, seq), generator=g)
        targets = torch.randint(0, vocab, (batch, seq), generator=g)
        bounds = _part_layers(view)
        mine = _rank_parts(view, rank, len(bounds))
        stages = [PipelineStage(_Part(model, *bounds[i], i == 0, i == len(bounds) - 1), i, len(bounds),
                                torch.device("cpu")) for i in mine]
        schedule = _schedule(view, stages, csv_path)
        losses = []
        if 0 in mine and len(bounds) - 1 in mine:
            schedule.step(tokens, target=targets, losses=losses)
        elif 0 in mine:
            schedule.step(tokens)
        elif len(bounds) - 1 in mine:
            schedule.step(target=targets, losses=losses)
        else:
            schedule.step()
        grads = {name: p.grad.detach().clone() for name, p in model.named_parameters() if p.grad is not None}
        # the reference: one process, the whole batch; with equal micro-batches the mean of the
        # micro-batch losses (the schedule scales gradients by 1 / micro-batches) is the batch's
        reference = _model(view.layers, width, vocab, seed)
        reference_loss = _loss(_whole(reference, tokens), targets)
        reference_loss.backward()
        result = {"grad_error": max((float((grads[n] - p.grad).abs().max()) for n, p in reference.named_parameters()
                                     if n in grads), default=0.0),
                  "parameters_with_gradients": len(grads)}
        if losses:
            result["loss_error"] = abs(sum(x.item() for x in losses) / view.micro_batches - reference_loss.item())
        gathered = [None] * view.pp
        dist.all_gather_object(gathered, result)
        if rank == 0:
            with open(result_path, "w") as handle:
                json.dump(gathered, handle)
    finally:
        dist.destroy_process_group()


def _whole(model, tokens):
    x = model["tok_embeddings"](tokens)
    for block in model["layers"]:
        x = block(x)
    return model["lm_head"](model["norm"](x))


def run_pipeline_plan(plan_dict: dict, width: int = 16, vocab: int = 32, seq: int = 8, seed: int = 0) -> dict:
    """Largest |difference| of the loss and of any gradient between the plan's pipeline on pp gloo
    processes and one process; `parameters_with_gradients` counts every parameter once."""
    import torch.multiprocessing as mp
    view = hybrid_view(plan_dict)
    if view.schedule in ("zb-h1", "zb-h2"):
        raise InputError(f"schedule {view.schedule}: the pipeline runner runs 1f1b, gpipe, interleaved, zb-v and "
                         "zb-exact", "plan")
    with tempfile.TemporaryDirectory() as folder:
        init_file, result_path = os.path.join(folder, "init"), os.path.join(folder, "result.json")
        csv_path = None
        if view.schedule == "zb-exact":
            from solver_plan.export.schedule_csv import csv_text, exact_schedule_rows
            csv_path = os.path.join(folder, "schedule.csv")
            with open(csv_path, "w") as handle:
                handle.write(csv_text(exact_schedule_rows(plan_dict, view.pp, view.micro_batches)))
        mp.spawn(_worker, args=(view, width, vocab, seq, seed, init_file, result_path, csv_path), nprocs=view.pp,
                 join=True)
        with open(result_path) as handle:
            per_rank = json.load(handle)
    return {"loss_error": max(r.get("loss_error", 0.0) for r in per_rank),
            "grad_error": max(r["grad_error"] for r in per_rank),
            "parameters_with_gradients": sum(r["parameters_with_gradients"] for r in per_rank)}
