"""PipeDream profile importer: all 14 profiles import and validate; spot-checked values; errors."""
import pytest

from solver_plan.errors import InputError
from solver_plan.pipeline.chain import linearize
from solver_plan.data import data_dir
from solver_plan.graph.importers import load_pipedream_profile
from solver_plan.graph.ops import OpType

PROFILES = data_dir() / "pipedream-profiles"
MODELS = ["alexnet", "vgg16", "resnet18", "resnet50", "resnet101", "resnext50", "resnext101", "densenet121",
          "inception_v3", "squeezenet1_0", "nasnetamobile", "nasnetalarge", "gnmt", "gnmt_large"]
NODES = {"alexnet": 23, "vgg16": 41, "resnet50": 177, "densenet121": 429, "nasnetalarge": 1251, "gnmt": 48}

needs_data = pytest.mark.skipif(not PROFILES.is_dir(), reason=f"no PipeDream profiles at {PROFILES}")


@needs_data
@pytest.mark.parametrize("model", MODELS)
def test_every_profile_imports_and_validates(model):
    graph = load_pipedream_profile(PROFILES / model / "graph.txt")
    assert graph.has_measured_times
    assert all(op.op_type == OpType.PROFILED for op in graph)
    if model in NODES:
        assert len(graph) == NODES[model]
    # edges from the file survive: the graph is connected from its sources to one sink
    sinks = [op.name for op in graph if not graph.successors(op.name)]
    assert len(sinks) >= 1 and len(graph.edges) >= len(graph) - 1
    chain = linearize(graph)
    assert len(chain) >= 1


@needs_data
def test_spot_checked_values_resnet50():
    graph = load_pipedream_profile(PROFILES / "resnet50", batch=8)
    op = graph.op("node76")  # Conv2d(128, 512, 1x1)
    assert op.measured.forward_s == pytest.approx(1.318e-3)
    assert op.measured.backward_s == pytest.approx(2.796e-3)
    assert op.activation_bytes == 205520896.0
    assert op.params == 262144 // 4
    assert op.output.shape == (8, 205520896 // 4 // 8)
    assert "Conv2d(128, 512" in op.attr("description")
    assert graph.successors("node76") == ("node77",)


@needs_data
def test_list_valued_activations_and_dag_edges_gnmt():
    graph = load_pipedream_profile(PROFILES / "gnmt")
    lstm = graph.op("node7")
    assert lstm.activation_bytes == 6291456.0 + 131072.0 + 131072.0
    assert len(lstm.outputs) == 3
    assert any(len(graph.predecessors(op.name)) > 1 for op in graph)  # joins: a DAG, not a chain


@needs_data
def test_dag_cut_counts_skip_connections():
    chain = linearize(load_pipedream_profile(PROFILES / "resnet50"))
    # somewhere inside a residual block both the block input and the branch cross the cut
    assert any(c > o for c, o in zip(chain.cut[:-1], chain.output[:-1]))
    assert chain.input_bytes == pytest.approx(77070336.0)
    # the 'Input' node's own time (data loading) is not a layer
    assert sum(chain.forward_s) < 1.0


def write(tmp_path, text):
    path = tmp_path / "graph.txt"
    path.write_text(text)
    return path


GOOD = ("node1 -- Input -- forward_compute_time=0.0, backward_compute_time=0.0, activation_size=16.0, parameter_size=0.0\n"
        "node2 -- Linear(4, 4) -- forward_compute_time=1.5, backward_compute_time=3.0, activation_size=[8.0; 8.0], parameter_size=80.0\n"
        "\tnode1 -- node2\n")


def test_small_file_and_convention(tmp_path):
    graph = load_pipedream_profile(write(tmp_path, GOOD))
    op = graph.op("node2")
    assert op.measured.forward_s == pytest.approx(1.5e-3) and op.params == 20
    assert [t.shape for t in op.outputs] == [(128, 1), (128, 1)]  # nominal default batch
    assert [t.shape for t in load_pipedream_profile(write(tmp_path, GOOD), batch=1).op("node2").outputs] == [(1, 2), (1, 2)]
    assert graph.predecessors("node2") == ("node1",)


@pytest.mark.parametrize("bad, line, needle", [
    ("node1 -- Input\n", 1, "expected 'nodeN --"),
    ("node1 -- X -- forward_compute_time=abc, backward_compute_time=0, activation_size=1, parameter_size=0\n", 1, "forward_compute_time"),
    ("node1 -- X -- forward_compute_time=1, activation_size=1, parameter_size=0\n", 1, "missing backward_compute_time"),
    (GOOD + "\tnode1 node2\n", 4, "edge"),
    (GOOD + "\tnode1 -- node9\n", 4, "unknown node 'node9'"),
    ("node1 -- X -- forward_compute_time=-1, backward_compute_time=0, activation_size=1, parameter_size=0\n", 1, "non-negative"),
    ("node1 -- X -- forward_compute_time=1e400, backward_compute_time=0, activation_size=1, parameter_size=0\n", 1, "finite"),
    ("node1 -- X -- forward_compute_time=1, backward_compute_time=0, activation_size=1, parameter_size=0, extra=5\n", 1, "unknown statistic 'extra'"),
])
def test_unreadable_lines_name_file_and_line(tmp_path, bad, line, needle):
    path = write(tmp_path, bad)
    with pytest.raises(InputError) as info:
        load_pipedream_profile(path)
    assert f"{path}:{line}" in str(info.value) and needle in str(info.value)


def test_missing_file_and_cycle(tmp_path):
    with pytest.raises(InputError, match="no such PipeDream profile"):
        load_pipedream_profile(tmp_path / "absent.txt")
    cyclic = GOOD + "\tnode2 -- node1\n"
    with pytest.raises(InputError, match="cycle"):
        load_pipedream_profile(write(tmp_path, cyclic))
