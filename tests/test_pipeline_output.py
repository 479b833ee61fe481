"""Pipeline output in the model's terms: layers by name and block, numbered in the user's chain,
notes without raw Python values, the command's wall time; Gantt charts render with a legend."""
from __future__ import annotations

import argparse
import re

import pytest

from solver_plan.pipeline.cli import register_command
from solver_plan.pipeline.describe import describe_layers, original_span, shared_processors


def parse(argv):
    parser = argparse.ArgumentParser()
    register_command(parser.add_subparsers())
    return parser.parse_args(argv)


GPT = ("wte", "wpe", "add0") + tuple(f"block{i}/self_attn/norm..block{i}/mlp/residual" for i in range(6)) + (
    "final_norm", "lm_head", "loss0")


def test_blocks_are_ranges_and_flat_names_first_to_last():
    assert describe_layers(GPT, 0, 5) == "wte .. add0, block0-2 (3 blocks)"
    assert describe_layers(GPT, 6, 11) == "block3-5 (3 blocks), final_norm .. loss0"
    assert describe_layers(GPT, 4, 4) == "block1"


def test_scopes_cut_by_a_stage_say_part():
    names = ("stem/conv0", "stem/relu0", "mix/a", "mix/b", "mix/c", "head/fc")
    assert describe_layers(names, 0, 3) == "stem, mix (part)"
    assert describe_layers(names, 4, 5) == "mix (part), head"


def test_merged_layers_map_back_to_the_full_chain():
    full = tuple(f"n{i}" for i in range(10))
    merged = ("n0..n2", "n3", "n4..n8", "n9")
    assert original_span(full, merged, 1, 2) == (3, 8)
    assert original_span(full, merged, 0, 3) == (0, 9)


def test_shared_processor_is_said():
    stage = argparse.Namespace
    stages = [stage(processor=0), stage(processor=1), stage(processor=0)]
    (line,) = shared_processors(stages)
    assert line.startswith("processor 0 runs stages 0, 2")


def test_pipeline_output_names_layers_and_wall_time(tmp_path, capsys):
    args = parse(["pipeline", "--model", "gpt2:layers=4,seq=128,batch=2", "--processors", "2", "--time-limit", "20",
                  "--gantt", str(tmp_path / "g.png")])
    args.started = __import__("time").perf_counter()
    assert args.func(args) == 0
    out = capsys.readouterr().out
    assert "{" not in out and "[{" not in out  # no raw Python dicts or lists in notes
    assert re.search(r"a chain of (\d+) layers", out)
    assert "block" in out and "layers (of " in out
    assert re.search(r"wall time \d+\.\d\d s since the command started", out)
    assert (tmp_path / "g.png").stat().st_size > 1000


def test_gantt_has_a_legend_and_labels_every_wide_bar(tmp_path, monkeypatch):
    matplotlib = pytest.importorskip("matplotlib")
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from solver_plan.pipeline import gantt
    args = parse(["pipeline", "--model", "resnet50:batch=2,image=64", "--processors", "3", "--memory", "1GB",
                  "--time-limit", "20"])
    from solver_plan.pipeline.api import plan_pipeline
    from solver_plan.pipeline.cli import build_problem
    result = plan_pipeline(build_problem(args), "madpipe", "exact", time_limit=20)
    figures = []
    monkeypatch.setattr(plt, "close", lambda fig: figures.append(fig))
    gantt.save_gantt(result.pattern, tmp_path / "g.png", title="what was run")
    (fig,) = figures
    assert fig.legends and {t.get_text() for t in fig.legends[0].get_texts()} >= {"forward (F)", "backward (B)"}
    top, bottom = fig.axes
    labels = [t.get_text() for t in top.texts]
    assert all(re.fullmatch(r"(F|B|CF|CB)\d+( n(-\d+)?)?", text) for text in labels)
    assert all(re.fullmatch(r"(F|B|CF|CB)\d+( \d+)?", t.get_text()) for t in bottom.texts)
    wide = {op.name for op in result.pattern.ops.operations if op.duration >= 0.02 * result.pattern.period}
    assert wide <= {text.split()[0] for text in labels}
    assert top.get_xlabel().startswith("time (")
    plt.close(fig)


def test_flat_layer_names_are_summarised_by_kind():
    names = tuple(f"node{i}" for i in range(6))
    kinds = {"node0": "Conv2d", "node1": "ReLU", "node2": "Conv2d", "node3": "ReLU", "node4": "Conv2d", "node5": "Linear"}
    assert describe_layers(names, 0, 5, kinds) == "node0 .. node5 (6 layers: 3 Conv2d, 2 ReLU, 1 Linear)"


def test_profile_layer_kinds_read_the_descriptions():
    from pathlib import Path

    from solver_plan.pipeline.describe import profile_layer_kinds
    profile = Path(__file__).resolve().parents[1] / "data" / "pipedream-profiles" / "vgg16" / "graph.txt"
    kinds = profile_layer_kinds(str(profile))
    assert "Conv2d" in kinds.values() and "Linear" in kinds.values()
    assert profile_layer_kinds("gpt2") == {}
