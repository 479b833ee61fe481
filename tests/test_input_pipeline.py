"""Host input-pipeline bound (solver_plan/cost/input_pipeline.py), against hand calculations."""
import math

import pytest
import yaml

from solver_plan.cost.input_pipeline import HostInputPipeline, measured_images_per_core_s
from solver_plan.errors import InputError


def test_dgx1_like_host_is_core_bound():
    # 8 GPUs x 8 workers = 64 workers, but only 40 - 8 = 32 cores are free for them.
    loader = HostInputPipeline(workers_per_device=8, cpu_cores_per_node=40, images_per_core_s=300.0)
    assert loader.busy_cores(8) == 32
    assert loader.images_per_s(8) == pytest.approx(32 * 300.0)
    assert loader.images_per_s(8, nodes=4) == pytest.approx(4 * 32 * 300.0)


def test_few_workers_are_worker_bound():
    # 2 GPUs x 4 workers = 8 workers on 38 free cores: the workers are the limit.
    loader = HostInputPipeline(workers_per_device=4, cpu_cores_per_node=40, images_per_core_s=250.0)
    assert loader.busy_cores(2) == 8
    assert loader.images_per_s(2) == pytest.approx(2000.0)


def test_step_is_the_slower_of_gpu_and_loader():
    loader = HostInputPipeline(workers_per_device=8, cpu_cores_per_node=40, images_per_core_s=300.0)
    # bound 9,600 images/s: a 2,048-image batch needs 0.2133 s of loading.
    assert loader.step_s(0.150, 2048, 8) == pytest.approx(2048 / 9600)
    assert loader.step_s(0.300, 2048, 8) == pytest.approx(0.300)


def test_host_filled_by_training_processes_gives_no_images():
    loader = HostInputPipeline(workers_per_device=2, cpu_cores_per_node=8, images_per_core_s=300.0)
    assert loader.busy_cores(8) == 0
    assert loader.step_s(0.1, 256, 8) == math.inf


@pytest.mark.parametrize("kwargs, key", [
    ({"workers_per_device": 0, "cpu_cores_per_node": 40, "images_per_core_s": 1.0}, "workers_per_device"),
    ({"workers_per_device": 1, "cpu_cores_per_node": 2.5, "images_per_core_s": 1.0}, "cpu_cores_per_node"),
    ({"workers_per_device": 1, "cpu_cores_per_node": 4, "images_per_core_s": -3.0}, "images_per_core_s"),
])
def test_bad_values_name_their_key(kwargs, key):
    with pytest.raises(InputError) as info:
        HostInputPipeline(**kwargs)
    assert key in str(info.value)


def test_measured_rate_is_read_from_the_record(tmp_path):
    path = tmp_path / "record.yaml"
    path.write_text(yaml.safe_dump({"images_per_second": {"decode_crop_resize_flip": {"median": 309.5}}}))
    assert measured_images_per_core_s(path) == 309.5
    path.write_text("images_per_second: {}\n")
    with pytest.raises(InputError):
        measured_images_per_core_s(path)


def test_committed_measurement_is_readable():
    from solver_plan.data import data_dir
    records = sorted((data_dir() / "measurements").glob("input-pipeline-*.yaml"))
    assert records, "a measured input-pipeline record is committed"
    assert all(measured_images_per_core_s(p) > 0 for p in records)


def test_parse_host_loader_and_its_errors():
    from solver_plan.cost.input_pipeline import parse_host_loader
    loader = parse_host_loader("workers=8,cores=40,images_per_core=250")
    assert (loader.workers_per_device, loader.cpu_cores_per_node, loader.images_per_core_s) == (8, 40, 250.0)
    assert parse_host_loader("workers=2,cores=16").images_per_core_s > 0  # the committed measurement
    for text, word in [("workers=8", "cores"), ("workers=8,cores=40,speed=3", "speed"),
                       ("workers=x,cores=40", "workers"), ("workers=0,cores=40", "workers"),
                       ("workers=8,cores=40,images_per_core=-1", "images_per_core")]:
        with pytest.raises(InputError) as info:
            parse_host_loader(text)
        assert "--host-loader" in str(info.value) and word in str(info.value), text


def test_plan_command_prints_the_loader_bound(capsys):
    from solver_plan.cli import main
    code = main(["plan", "--model", "lenet:batch=4096", "--cluster", "v100x8-nvlink", "--planner", "data-parallel",
                 "--host-loader", "workers=1,cores=10,images_per_core=100", "--time-limit", "20", "--quiet"])
    out = capsys.readouterr().out
    assert code == 0
    # 8 workers on 2 free cores (10 - 8 training processes): 200 images/s, far below LeNet's GPU rate
    assert "host loader: 200 images/s" in out and "binding" in out and "not binding" not in out
    assert main(["plan", "--model", "lenet", "--host-loader", "workers=1"]) == 2
    assert "--host-loader" in capsys.readouterr().err


def test_loader_applies_to_image_models_only(capsys):
    from solver_plan.cli import main
    assert main(["plan", "--model", "mlp:layers=2,hidden=64,batch=32", "--cluster", "v100x8-nvlink",
                 "--planner", "data-parallel", "--host-loader", "workers=1,cores=10", "--time-limit", "20",
                 "--quiet"]) == 0
    assert "host loader: not applied" in capsys.readouterr().out
    assert main(["plan", "--model", "lenet", "--host-loader", ""]) == 2  # an empty value is an error
    assert "--host-loader" in capsys.readouterr().err
    assert main(["plan", "--model", "lenet", "--host-loader", "workers=99999999999,cores=40"]) == 2
    assert "workers" in capsys.readouterr().err


def test_bound_for_packs_devices_onto_nodes():
    loader = HostInputPipeline(workers_per_device=4, cpu_cores_per_node=64, images_per_core_s=100.0)
    # 12 GPUs on nodes of 8: 2 nodes of 8 devices, 32 workers each (32 <= 64 - 8 free cores)
    assert loader.bound_for(12, 8) == (2 * 32 * 100.0, 8, 2)
    assert loader.bound_for(1, 8) == (4 * 100.0, 1, 1)
