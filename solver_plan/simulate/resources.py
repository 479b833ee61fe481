"""The simulator's devices: one per accelerator, one communication device per link (FlexFlow models
each hardware connection as a device that only runs transfers, so compute and communication overlap).

Links follow the cluster's two levels: inside a node, one link per ordered pair of devices (NVLink or
PCIe point to point, full duplex); between nodes, one link per ordered pair of nodes (the network
path node a -> node b, shared by every transfer between those nodes). On a cluster whose runtime
syncs gradients through parameter owners (`cluster.gradient_sync`), each device also has a gradient
port: the copies into it as an owner, received one after the other (cluster/sync.py).
"""
from __future__ import annotations

from solver_plan.cluster import Cluster


class Resources:
    """Integer ids: 0..D-1 the devices, then intra-node links, then inter-node links."""

    def __init__(self, cluster: Cluster):
        self.cluster = cluster
        self.num_devices = cluster.num_devices
        per_node = cluster.devices_per_node
        self._names = [f"device {d}" for d in range(self.num_devices)]
        self._intra: dict[tuple[int, int], int] = {}
        for node in range(cluster.nodes):
            members = range(node * per_node, (node + 1) * per_node)
            for a in members:
                for b in members:
                    if a != b:
                        self._intra[(a, b)] = len(self._names)
                        self._names.append(f"link d{a}->d{b}")
        self._inter: dict[tuple[int, int], int] = {}
        for a in range(cluster.nodes):
            for b in range(cluster.nodes):
                if a != b:
                    self._inter[(a, b)] = len(self._names)
                    self._names.append(f"network n{a}->n{b}")
        self._ports: dict[int, int] = {}
        if cluster.gradient_sync.owner_based:
            for d in range(self.num_devices):
                self._ports[d] = len(self._names)
                self._names.append(f"gradient port d{d}")

    def __len__(self) -> int:
        return len(self._names)

    def link(self, src: int, dst: int) -> int:
        """The communication device carrying data from device `src` to device `dst` (src != dst)."""
        a, b = self.cluster.node_of(src), self.cluster.node_of(dst)
        return self._intra[(src, dst)] if a == b else self._inter[(a, b)]

    def port(self, owner: int) -> int:
        """The resource receiving the gradient copies of the parameters `owner` owns."""
        return self._ports[owner]

    def name(self, resource: int) -> str:
        """The display name of a resource id ("barrier" for the uncontended resource)."""
        return "barrier" if resource < 0 else self._names[resource]

    def is_device(self, resource: int) -> bool:
        """Whether the resource id is an accelerator (not a link or gradient port)."""
        return 0 <= resource < self.num_devices
