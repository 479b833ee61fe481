"""LLM Foundry's whole 'H100 80GB BF16' and 'A100 80GB' benchmark tables against the hybrid model: how the
attention kernel's price decides the error as sequences grow.

    python scripts/llm_foundry_sweep.py [--write docs/llm-foundry-sweep.md]

Every row of data/published/llm-foundry-h100-bf16.csv (52 runs: MPT 760m-70b on 8-64 H100, sequences 512 to
65536, FSDP1 FULL_SHARD, micro batch and accumulation as published) and of llm-foundry-a100-80gb.csv (the same
on 8-64 A100 80GB, 2023; its head-dimension-64 models left out) is priced pinned to its configuration
(`evaluate`, memory limit none) twice: with the `llm-foundry` profile (the runs' attn_impl triton, MPT's 2022
Triton FlashAttention at the device's `triton2022` curve, derived from kernel measurements:
scripts/published_device_tables.py) and with `llm-foundry-flash` (the same stack priced with the
FlashAttention-2 curve). Nothing here is fitted: the rows validate the kernel tables, which come from
kernel-level measurements only. Prints the per-row errors and the median signed error by attention share
(causal attention FLOPs over the other matrix FLOPs of a block, s / 12h: 2 s h per token against 24 h^2).
"""
from __future__ import annotations

import argparse
import csv
import statistics
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from solver_plan.hybrid import evaluate  # noqa: E402

# table -> (rows, cluster): DGX H100 (the README names no network; as runs-2022-2025.yaml's rows); DGX A100
# SuperPOD, 8 x 200 Gb/s per node (the table's "1600 Gbps node-node interconnect")
TABLES = {"H100 80GB BF16": (ROOT / "data" / "published" / "llm-foundry-h100-bf16.csv", "h100-80gb-superpod"),
          "A100 80GB": (ROOT / "data" / "published" / "llm-foundry-a100-80gb.csv", "a100-80gb-superpod")}
# (n_layers, d_model, n_heads) of scripts/train/yamls/pretrain/mpt-<model>.yaml at llm-foundry 5e85bd62d;
# every one has head dimension 128 (the yamls' comments: heads "modified ... so that d_head == 128")
SHAPES = {"760m": (24, 1536, 12), "1b": (24, 2048, 16), "3b": (32, 2560, 20), "7b": (32, 4096, 32),
          "13b": (40, 5120, 40), "30b": (48, 7168, 56), "70b": (80, 8192, 64)}
PROFILES = ("llm-foundry", "llm-foundry-flash")
SHARE_BINS = ((0.0, 0.1), (0.1, 0.3), (0.3, 0.7), (0.7, float("inf")))


def rows(table: str = "H100 80GB BF16") -> list[dict]:
    """The table's rows whose model has a known shape (head dimension 128), each with its cluster."""
    path, cluster = TABLES[table]
    with open(path) as f:
        return [{**row, "cluster": cluster} for row in csv.DictReader(line for line in f if not line.startswith("#"))
                if row["model"] in SHAPES]


def model_spec(row: dict) -> str:
    """The zoo spec of a row: MPT's GPT-2 layout (LayerNorm, biases, learned positions of the row's
    sequence, tied embeddings, 4h GELU MLP) at the yaml's shape."""
    layers, hidden, heads = SHAPES[row["model"]]
    seq = int(row["seq"])
    return (f"gpt2:layers={layers},hidden={hidden},heads={heads},head_dim={hidden // heads},ffn={4 * hidden},"
            f"seq={seq},positions={seq},vocab=50368")


def pins(row: dict) -> dict:
    """The row's configuration as `evaluate` pins it: FSDP over all GPUs (FULL_SHARD = ZeRO-3)."""
    return {"dp": int(row["gpus"]), "tp": 1, "pp": 1, "micro_batch_size": int(row["micro_batch"]),
            "zero_stage": 3 if row["sharding"] == "FULL_SHARD" else 2,
            "recompute": "full" if row["activation_checkpointing"] == "True" else "none"}


def published_step(row: dict) -> float:
    """Seconds per step: global batch tokens over the tokens per second of all GPUs."""
    return int(row["global_batch"]) * int(row["seq"]) / (float(row["tokens_per_s_per_gpu"]) * int(row["gpus"]))


def attention_share(row: dict) -> float:
    return int(row["seq"]) / (12.0 * SHAPES[row["model"]][1])


def price(row: dict, runtime: str) -> float:
    result = evaluate(model_spec(row), row["cluster"], int(row["global_batch"]), pins(row), memory_limit="none",
                      runtime=runtime, precision="bf16")
    return result.plan.step_time_s if result.plan is not None else float("nan")


def compare(table: str) -> list[dict]:
    out = []
    for row in rows(table):
        step = published_step(row)
        errors = {name: price(row, name) / step - 1.0 for name in PROFILES}
        out.append({"row": row, "step": step, "share": attention_share(row), "errors": errors})
    return out


def summary_lines(results: list[dict]) -> list[str]:
    lines = []
    for name in PROFILES:
        errors = [r["errors"][name] for r in results]
        lines.append(f"{name}: median |error| {100 * statistics.median(abs(e) for e in errors):.1f}%, "
                     f"worst {100 * max(errors, key=abs):+.1f}%, within 15%: {sum(abs(e) <= 0.15 for e in errors)}"
                     f"/{len(errors)}, within 30%: {sum(abs(e) <= 0.30 for e in errors)}/{len(errors)}")
    for low, high in SHARE_BINS:
        part = [r for r in results if low <= r["share"] < high]
        if part:
            shown = ", ".join(f"{name} {100 * statistics.median(r['errors'][name] for r in part):+.1f}%"
                              for name in PROFILES)
            lines.append(f"attention share {low:g}-{high:g} ({len(part)} rows): median error {shown}")
    return lines


def markdown(tables: dict[str, list[dict]]) -> str:
    out = ["# LLM Foundry's benchmark tables: the attention kernel's price", "",
           "Generated by `python scripts/llm_foundry_sweep.py --write docs/llm-foundry-sweep.md` from "
           "`data/published/llm-foundry-h100-bf16.csv` and `llm-foundry-a100-80gb.csv` (every row of the tables, "
           "their sources in the files' headers; the A100 table's head-dimension-64 models left out). "
           "Error = predicted / published step - 1 (negative: predicted faster than the run). `llm-foundry` prices "
           "the runs' Triton kernel (attn_impl triton) at the device's `triton2022` curve, `llm-foundry-flash` the "
           "same stack at the FlashAttention-2 curve; both curves come from kernel measurements only "
           "(data/hardware/devices.yaml, scripts/published_device_tables.py). Share: attention over the other "
           "matrix FLOPs of a block, s / 12h.", ""]
    for table, results in tables.items():
        out += [f"## {table} ({results[0]['row']['cluster']})", ""]
        out += [f"- {line}" for line in summary_lines(results)] + [""]
        out += ["| model | seq | GPUs | b x m | AC | share | published step (s) | llm-foundry | llm-foundry-flash |",
                "| --- | ---: | ---: | --- | --- | ---: | ---: | ---: | ---: |"]
        for r in results:
            row = r["row"]
            out.append(f"| {row['model']} | {row['seq']} | {row['gpus']} | {row['micro_batch']} x {row['grad_accum']} | "
                       f"{'full' if row['activation_checkpointing'] == 'True' else 'none'} | {r['share']:.2f} | "
                       f"{r['step']:.3f} | " + " | ".join(f"{100 * r['errors'][n]:+.1f}%" for n in PROFILES) + " |")
        out.append("")
    return "\n".join(out)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--write", help="write the markdown table to this file")
    args = parser.parse_args(argv)
    tables = {table: compare(table) for table in TABLES}
    for table, results in tables.items():
        print(f"{table}:")
        for line in summary_lines(results):
            print(f"  {line}")
    if args.write:
        Path(args.write).write_text(markdown(tables))
        print(f"wrote {args.write}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
