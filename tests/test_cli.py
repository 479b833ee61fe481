"""The command line: happy paths print plans and JSON; bad input is one line and exit status 2."""
import json

import pytest

from solver_plan.cli import main


def run(capsys, *argv):
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def test_models_and_clusters_listed(capsys):
    code, out, _ = run(capsys, "models")
    assert code == 0 and "resnet50" in out and "mlp" in out
    code, out, _ = run(capsys, "clusters")
    assert code == 0 and "v100x8-nvlink" in out and "h100-4x8-ib" in out


def test_check_cluster_file(capsys, tmp_path):
    path = tmp_path / "c.yaml"
    path.write_text("name: mine\ndevices_per_node: 4\ndevice: {peak_flops: 100TFLOPS, memory: 16GB}\n"
                    "links: {intra_node: {bandwidth: 100GB/s}}\n")
    code, out, _ = run(capsys, "check", str(path))
    assert code == 0 and "mine" in out and "w = 1.000e-14" in out


def test_plan_writes_data_parallel_resnet50_json(capsys, tmp_path):
    out_path = tmp_path / "plan.json"
    code, out, _ = run(capsys, "plan", "--model", "resnet50:batch=8,image=64", "--cluster", "v100x8-nvlink",
                       "--planner", "data-parallel", "--out", str(out_path))
    assert code == 0, out
    plan = json.loads(out_path.read_text())
    assert plan["schema_version"] == 1 and plan["planner"] == "data-parallel"
    assert plan["status"] == "FEASIBLE" and plan["objective_s"] > 0
    convs = [op for op in plan["operators"] if op["type"] == "Conv2d"]
    assert len(convs) == 53
    assert all(op["degrees"]["sample"] == 8 and len(op["devices"]) == 8 for op in convs)
    assert all(op["degrees"][d] == 1 for op in convs for d in ("out_channel", "in_channel", "height", "width"))
    assert len(plan["device_memory_bytes"]) == 8
    assert sum(op["sync_bytes"] for op in plan["operators"]) > 0  # gradients are all-reduced
    assert "data-parallel" in out and "Conv2d" in out


def test_plan_on_profile_file(capsys, tmp_path):
    from solver_plan.data import pipedream_profile
    code, out, _ = run(capsys, "plan", "--model", str(pipedream_profile("alexnet")), "--devices", "4",
                       "--planner", "single-device")
    assert code == 0 and "single-device" in out


@pytest.mark.parametrize("argv, fragment", [
    (["plan", "--model", "resnet51"], "resnet51"),
    (["plan", "--model", "mlp:hiden=3"], "hiden"),
    (["plan", "--model", "mlp:layers=-1"], "layers"),
    (["plan", "--model", "missing/graph.txt"], "missing/graph.txt"),
    (["plan", "--cluster", "tpu-pod"], "tpu-pod"),
    (["plan", "--planner", "magic"], "magic"),
    (["plan", "--time-limit", "0"], "--time-limit"),
    (["plan", "--memory-limit", "lots"], "--memory-limit"),
    (["plan", "--devices", "9"], "--devices"),
    (["plan", "--cluster", "p100-4x4", "--devices", "6"], "--devices"),
    (["check", "nope.yaml"], "nope.yaml"),
    (["plan", "--out", "/proc/no/plan.json"], "--out"),
    (["pipeline", "--model", "lenet", "--processors", "2", "--gantt", "/proc/no/g.png"], "--gantt"),
    (["simulate", "--plan", "missing.json"], "missing.json"),
])
def test_bad_input_is_one_line_exit_2(capsys, argv, fragment):
    code, _, err = run(capsys, *argv)
    assert code == 2
    assert fragment in err
    assert "Traceback" not in err and len(err.strip().splitlines()) == 1


def test_bad_yaml_exit_2(capsys, tmp_path):
    path = tmp_path / "bad.yaml"
    path.write_text("devices_per_node: 4\ndevice: {peak_flops: 1TFLOPS, memory: 16GB}\n"
                    "links: {intra_node: {bandwidth: 10GB/s}}\nwat: 1\n")
    code, _, err = run(capsys, "check", str(path))
    assert code == 2 and "wat" in err


def test_baseline_over_memory_limit_is_infeasible_with_reason(capsys):
    code, out, _ = run(capsys, "plan", "--model", "mlp:layers=2,hidden=4096,batch=8", "--devices", "2",
                       "--planner", "data-parallel", "--memory-limit", "100MB")
    assert code == 1
    assert "INFEASIBLE" in out and "on device 0" in out and "over the limit 100.00 MB" in out


def test_plan_with_simulation(capsys):
    code, out, _ = run(capsys, "plan", "--model", "mlp:layers=3,hidden=256,batch=32", "--devices", "4",
                       "--planner", "greedy", "--simulate")
    assert code == 0
    assert "simulated iteration" in out and "critical path" in out


def test_device_memory_is_the_default_limit(capsys):
    # 2 x 8192^2 fp32 weights x 4 (weights, gradients, Adam) = 2.1 GB on one device: over a 1 GB device
    argv = ["plan", "--model", "mlp:layers=2,hidden=8192,batch=8", "--planner", "single-device"]
    code, out, _ = run(capsys, *argv, "--memory-limit", "1GB")
    assert code == 1 and "INFEASIBLE" in out
    code, out, _ = run(capsys, *argv, "--memory-limit", "none")
    assert code == 0 and "FEASIBLE" in out
    code, out, _ = run(capsys, *argv)  # device memory (16 GB V100) fits
    assert code == 0 and "limit 16.00 GB" in out


@pytest.mark.parametrize("argv, fragment", [
    (["plan", "--rows", "0"], "--rows"),
    (["plan", "--max-candidates", "1"], "--max-candidates"),
    (["pipeline", "--model", "lenet", "--processors", "2", "--time-limit", "0"], "--time-limit"),
    (["pipeline", "--model", "lenet", "--processors", "2", "--schedule", "nope"], "--schedule: unknown scheduler"),
])
def test_more_bad_arguments(capsys, argv, fragment):
    code, _, err = run(capsys, *argv)
    assert code == 2 and fragment in err and "Traceback" not in err


def test_zero_objective_profile_prints_no_ratio(capsys, tmp_path):
    path = tmp_path / "graph.txt"
    path.write_text("node1 -- A -- forward_compute_time=0, backward_compute_time=0, activation_size=4, parameter_size=0\n")
    code, out, _ = run(capsys, "plan", "--model", str(path), "--devices", "2")
    assert code == 0 and "objective 0.0 us" in out


def test_misspelt_planner_option_is_refused():
    from solver_plan.errors import InputError
    from solver_plan.intra.random_instances import random_problem
    from solver_plan.intra.solve import solve
    with pytest.raises(InputError, match="no option 'backnd'.*backend"):
        solve(random_problem(4, seed=0, shape="chain"), "milp", backnd="cbc")


def test_job_file_with_misspelt_option_names_the_job(tmp_path):
    from solver_plan.batch.jobfile import load_jobs
    from solver_plan.errors import InputError
    path = tmp_path / "jobs.yaml"
    path.write_text("jobs:\n  - name: j\n    models: [lenet]\n    clusters: [v100x8-nvlink]\n"
                    "    planners: [{name: greedy, options: {bogus: 1}}]\n")
    with pytest.raises(InputError, match="bogus"):
        load_jobs(path)
