import math

import pytest

from solver_plan.cluster import LinkLevel, cluster_from_dict, load_cluster, preset_names, resolve_cluster
from solver_plan.errors import InputError

REQUIRED_PRESETS = {"v100x8-nvlink", "p100-4x4", "k80-16x4", "a100x8-80gb", "h100-4x8-ib"}


def spec(**overrides):
    base = {
        "name": "test", "nodes": 2, "devices_per_node": 4,
        "device": {"name": "gpu", "peak_flops": "100TFLOPS", "memory": "16GB"},
        "links": {"intra_node": {"bandwidth": "100GB/s", "latency": "5us"},
                  "inter_node": {"bandwidth": "100Gb/s", "latency": "10us"}},
    }
    base.update(overrides)
    return base


def test_presets_load_and_have_expected_sizes():
    assert REQUIRED_PRESETS <= set(preset_names())
    sizes = {name: resolve_cluster(name).num_devices for name in REQUIRED_PRESETS}
    assert sizes == {"v100x8-nvlink": 8, "p100-4x4": 16, "k80-16x4": 64, "a100x8-80gb": 8, "h100-4x8-ib": 32}
    assert resolve_cluster("a100x8-80gb").device.memory == 80e9


def test_topology_levels_and_hardware_numbers():
    cluster = cluster_from_dict(spec())
    assert cluster.num_devices == 8
    assert cluster.level(0, 0) == LinkLevel.SAME_DEVICE
    assert cluster.level(0, 3) == LinkLevel.INTRA_NODE
    assert cluster.level(3, 4) == LinkLevel.INTER_NODE
    assert cluster.w == pytest.approx(1e-14)
    assert cluster.g_between(0, 1) == pytest.approx(1e-11)
    assert cluster.g_between(0, 5) == pytest.approx(8e-11)  # 100 Gb/s = 12.5 GB/s
    assert cluster.g_group((0, 1, 2, 3)) < cluster.g_group((2, 3, 4, 5))
    assert cluster.latency(0, 7) == pytest.approx(1e-5)
    assert cluster.bandwidth(1, 1) == math.inf


def test_override_given_as_yaml_string_number():
    assert cluster_from_dict(spec(hardware={"w": "8e-15"})).w == 8e-15  # YAML reads 8e-15 as a string


def test_overrides_of_w_and_g():
    cluster = cluster_from_dict(spec(hardware={"w": 2e-14, "g_inter_node": 1e-9}))
    assert cluster.w == 2e-14
    assert cluster.g(LinkLevel.INTER_NODE) == 1e-9
    assert cluster.g(LinkLevel.INTRA_NODE) == pytest.approx(1e-11)


def test_first_devices():
    cluster = resolve_cluster("h100-4x8-ib", devices=16)
    assert (cluster.nodes, cluster.devices_per_node) == (2, 8)
    small = resolve_cluster("h100-4x8-ib", devices=4)
    assert (small.nodes, small.devices_per_node, small.inter_node) == (1, 4, None)
    with pytest.raises(InputError, match="multiple of 8"):
        resolve_cluster("h100-4x8-ib", devices=12)
    with pytest.raises(InputError, match="1..32"):
        resolve_cluster("h100-4x8-ib", devices=0)


@pytest.mark.parametrize("mutate, where", [
    (lambda s: s.update(colour="red"), "colour"),
    (lambda s: s["device"].update(memory="16 parsecs"), "device.memory"),
    (lambda s: s["device"].update(memory=-4), "device.memory"),
    (lambda s: s["device"].pop("peak_flops"), "device.peak_flops"),
    (lambda s: s["links"]["intra_node"].update(bandwidth="fast"), "links.intra_node.bandwidth"),
    (lambda s: s["links"].pop("inter_node"), "links.inter_node"),
    (lambda s: s.update(nodes=0), "nodes"),
    (lambda s: s.update(devices_per_node="eight"), "devices_per_node"),
    (lambda s: s.update(hardware={"w": -1}), "hardware.w"),
    (lambda s: s.update(hardware={"gg": 1}), "hardware.gg"),
    (lambda s: s.update(hardware={"w": float("inf")}), "hardware.w"),
    (lambda s: s["links"].update(intra_node=None), "links.intra_node"),
    (lambda s: s.update(device=None), "device"),
])
def test_bad_cluster_specs_name_the_key(mutate, where):
    data = spec()
    mutate(data)
    with pytest.raises(InputError) as info:
        cluster_from_dict(data, "c.yaml")
    assert f"c.yaml.{where}" in str(info.value)


def test_malformed_yaml_file_names_line(tmp_path):
    path = tmp_path / "bad.yaml"
    path.write_text("name: x\nnodes: [1,\n")
    with pytest.raises(InputError, match="bad.yaml:"):
        load_cluster(path)


def test_unknown_preset_lists_presets():
    with pytest.raises(InputError, match="v100x8-nvlink"):
        resolve_cluster("tpu-pod")


def test_link_efficiency_and_nics_per_node_set_achieved_g():
    links = {"intra_node": {"bandwidth": "100GB/s", "efficiency": 0.8},
             "inter_node": {"bandwidth": "200Gb/s", "nics_per_node": 2, "efficiency": 0.9}}
    cluster = cluster_from_dict(spec(links=links))
    assert cluster.g(LinkLevel.INTRA_NODE) == pytest.approx(1 / 80e9)
    # 2 NICs x 25 GB/s shared by 4 devices, x 0.9
    assert cluster.g(LinkLevel.INTER_NODE) == pytest.approx(1 / (2 * 25e9 / 4 * 0.9))
    with pytest.raises(InputError, match="fraction"):
        cluster_from_dict(spec(links={**links, "intra_node": {"bandwidth": "1GB/s", "efficiency": 1.5}}))
    with pytest.raises(InputError, match="nics_per_node"):
        cluster_from_dict(spec(links={**links, "intra_node": {"bandwidth": "1GB/s", "nics_per_node": 2}}))


def test_superpod_presets():
    for name in ("a100-80gb-superpod", "h100-80gb-superpod"):
        cluster = resolve_cluster(name)
        assert cluster.num_devices == 4096
        assert cluster.first_devices(3072).nodes == 384
