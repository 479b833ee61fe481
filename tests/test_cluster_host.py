"""Cluster files' host section (host memory per node, PCIe bandwidth per device): parsed with
units, kept by first_devices, bad values named by key, presets from their datasheets."""
import pytest

from solver_plan.cluster.loader import cluster_from_dict, resolve_cluster
from solver_plan.errors import InputError

BASE = {"name": "c", "nodes": 2, "devices_per_node": 4,
        "device": {"name": "A100-SXM-80GB", "memory": "80GB"},
        "links": {"intra_node": {"bandwidth": "300GB/s"}, "inter_node": {"bandwidth": "25GB/s"}}}


def with_host(host):
    return dict(BASE, host=host)


def test_host_section_parsed_with_units_and_kept_by_first_devices():
    cluster = cluster_from_dict(with_host({"memory_per_node": "1TB", "device_bandwidth": "32GB/s"}), "c.yaml")
    assert cluster.host.memory_per_node == pytest.approx(1e12)
    assert cluster.host.device_bandwidth == pytest.approx(32e9)
    assert cluster.first_devices(4).host == cluster.host
    assert "host 1.00 TB per node, 32 GB/s per device" in cluster.describe()


def test_no_host_section_means_no_host():
    assert cluster_from_dict(BASE, "c.yaml").host is None


@pytest.mark.parametrize("host, key", [({"memory_per_node": "1TB"}, "device_bandwidth"),
                                       ({"device_bandwidth": "32GB/s"}, "memory_per_node"),
                                       ({"memory_per_node": "-1TB", "device_bandwidth": "32GB/s"}, "memory_per_node"),
                                       ({"memory_per_node": "1TB", "device_bandwidth": "32GB/s", "pcie": 4}, "pcie")])
def test_bad_host_section_names_the_key(host, key):
    with pytest.raises(InputError) as info:
        cluster_from_dict(with_host(host), "c.yaml")
    assert key in str(info.value)


@pytest.mark.parametrize("preset, memory, bandwidth", [("h100-80gb-superpod", 2e12, 64e9),
                                                       ("a100-80gb-superpod", 2e12, 32e9),
                                                       ("a100x8-80gb", 2e12, 32e9), ("v100x8-nvlink", 512e9, 16e9)])
def test_dgx_presets_carry_their_datasheet_host(preset, memory, bandwidth):
    # per direction: half the datasheets' both-ways PCIe figures (Gen5 128, Gen4 64, Gen3 32 GB/s)
    host = resolve_cluster(preset).host
    assert (host.memory_per_node, host.device_bandwidth) == (pytest.approx(memory), pytest.approx(bandwidth))


def test_host_written_back_by_cluster_yaml():
    import yaml

    from solver_plan.calibrate.output import cluster_yaml
    cluster = cluster_from_dict(with_host({"memory_per_node": "1TB", "device_bandwidth": "32GB/s"}), "c.yaml")
    assert cluster_from_dict(yaml.safe_load(cluster_yaml(cluster))).host == cluster.host
