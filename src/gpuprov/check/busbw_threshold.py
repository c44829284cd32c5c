"""The all-reduce's bus bandwidth threshold: from the inventory, else from the detected network hardware.

NCCL's busbw is comparable to the hardware's bandwidth whatever the number of ranks (nccl-tests,
doc/PERFORMANCE.md: "we can compare it with the hardware peak bandwidth"). Across hosts the bottleneck is
the network, so the expected busbw is each host's usable line rate x the fraction NCCL reaches of it, and
the threshold that fraction less a margin (so that the noise of one run does not drain a healthy host):

- InfiniBand / RoCE (ibstat, Active / LinkUp ports): NCCL reaches about 0.96 of line rate. NCCL's
  developers: 12.2 GB/s "is as good as you can get" on one 100 Gb/s card (NVIDIA/nccl-tests#29, 0.976);
  24 GB/s inter-node on 200 Gb/s HDR (NVIDIA/nccl#412, 0.96); 192 GB/s on DGX-A100's 8 x 200 Gb/s
  (NVIDIA/nccl#1576, 0.96). Each GPU uses its nearest NIC, so a host's usable rate is its slowest active
  port's rate x min(active ports, GPUs on the host).
- TCP sockets (no InfiniBand: NCCL_SOCKET_IFNAME's interfaces, /sys/class/net/IF/speed): far less, with
  a wide spread: "not more than 60% of wire speed" on 32 Gb/s (NVIDIA/nccl#209), 4-6 GB/s busbw on
  100 Gb/s (0.32-0.48, NVIDIA/nccl#450). 0.40 is taken as expected.

The ring is as slow as its slowest host: the cluster's expected figure is the minimum over the hosts.
gloo on CPU gets no hardware threshold (its speed is the CPUs' as much as the network's).

On one host the bottleneck is what joins the GPUs, read from `nvidia-smi topo -m` (gpu_topology.py). Only
where NVLink joins every GPU pair (NVSwitch systems) does an all-GPU all-reduce stay on NVLink: there the bar
is the system's published ring figure where busbw_systems.py lists it, else the slowest GPU's NVLink
bandwidth (the sum of its active links' speeds as `nvidia-smi nvlink -s` prints them, GB/s per direction)
x 0.73: 220 GB/s busbw on an 8 x A100-SXM4 host whose GPUs have 12 links x 25 GB/s = 300 GB/s
(NVIDIA/nccl-tests#228, 0.73). NVLink bridges between pairs of PCIe cards (A100 PCIe `NV12` pairs) give no
bar: the all-reduce crosses PCIe between the pairs (208 GB/s on a bridged pair, ~20 GB/s once a third GPU
joins: NVIDIA/nccl-tests#178), and nothing published says what a healthy host reaches there; nor does PCIe
alone. Where no bar derives, the check says it could not judge, never that it passed.

The network's ports are those NCCL will use: the CAs NCCL_IB_HCA names where it is set; else the active
ports at the fastest rate, since a slower port beside them is storage or management (Azure's ND H200 v5
conf lists mlx5_an0 at 100 Gb/s beside mlx5_ib0..7 at 400: Azure/azurehpc-health-checks
conf/nd96isr_h200_v5.conf) and the slowest would set the bar at a quarter of the fabric's.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from gpuprov.check import busbw_systems, gpu_topology, parsers

INVENTORY_VAR = "gpuprov_check_min_busbw_gbps"
IB_EFFICIENCY = 0.96  # NVIDIA/nccl-tests#29, NVIDIA/nccl#412, NVIDIA/nccl#1576
SOCKET_EFFICIENCY = 0.40  # NVIDIA/nccl#209, NVIDIA/nccl#450
NVLINK_EFFICIENCY = 0.73  # NVIDIA/nccl-tests#228 (0.73), NVIDIA/nccl-tests#212 (0.82)
MARGIN = 0.80  # the threshold: 80% of the expected figure


@dataclass(frozen=True)
class Threshold:
    gbps: float  # GB/s busbw (10^9 bytes per second)
    source: str  # where it comes from, in words


@dataclass(frozen=True)
class NoBar:
    """No threshold derives: why, in words (the check then says it could not judge)."""

    reason: str


@dataclass(frozen=True)
class HostRate:
    gbits: float  # usable line rate, Gb/s
    how: str  # e.g. "2 x 200 Gb/s InfiniBand (ibstat)"
    efficiency: float


def from_inventory(value: Any) -> Threshold | None:
    """The inventory's or -e's threshold; ValueError when it is not a positive number."""
    if value is None:
        return None
    gbps = float(value)
    if gbps <= 0:
        raise ValueError(f"{INVENTORY_VAR} must be above 0")
    return Threshold(gbps, f"inventory ({INVENTORY_VAR})")


def host_rate(data: Mapping[str, Any], socket_ifname: str, gpus: int, ib_hca: str = "") -> HostRate | None:
    """A host's usable network rate for NCCL, from what hostprobe gathered; None when unknown.
    `ib_hca` (NCCL_IB_HCA, where set) limits the ports to the CAs it picks."""
    run = data.get("ibstat") or {}
    hcas = hca_names(ib_hca)
    ports = [
        p
        for p in parsers.ibstat(str(run.get("stdout", "")) if run.get("rc") == 0 else "")
        if p.state == "Active"
        and p.physical_state == "LinkUp"
        and p.rate
        and (not ib_hca or selected(p.ca, hcas))
    ]
    if ports:
        fastest = max(p.rate for p in ports if p.rate)
        # Without NCCL_IB_HCA, a slower port is taken as storage/management: NCCL's rings use the fast ones.
        left_out = 0 if ib_hca else sum(1 for p in ports if p.rate != fastest)
        ports = ports if ib_hca else [p for p in ports if p.rate == fastest]
        used = min(len(ports), max(gpus, 1))
        slowest = min(p.rate for p in ports if p.rate)
        layers = "/".join(sorted({p.link_layer or "InfiniBand" for p in ports}))
        how = f"{used} x {slowest:g} Gb/s {layers} (ibstat)"
        if left_out:
            how += f", {left_out} slower port(s) left out (set NCCL_IB_HCA to name NCCL's)"
        return HostRate(used * slowest, how, IB_EFFICIENCY)
    speeds = {
        name: int(mbits)
        for name, mbits in (data.get("interface_speeds") or {}).items()
        if mbits and int(mbits) > 0 and selected(name, socket_ifname)
    }
    if not speeds:
        return None
    name = min(speeds, key=lambda n: speeds[n])
    return HostRate(
        speeds[name] / 1000, f"{name} {speeds[name] / 1000:g} Gb/s (sysfs speed)", SOCKET_EFFICIENCY
    )


def hca_names(ib_hca: str) -> str:
    """NCCL_IB_HCA without its port numbers (`=mlx5_0:1,mlx5_1:1` -> `=mlx5_0,mlx5_1`), for selected()."""
    return ",".join(entry.split(":")[0] for entry in ib_hca.split(","))


def nvlink_rate(data: Mapping[str, Any]) -> HostRate | None:
    """A host's NVLink bandwidth per GPU (its slowest GPU's active links, summed), from `nvidia-smi nvlink
    -s`; None when it did not run or a GPU has no active link (that GPU's traffic goes over PCIe)."""
    run = data.get("smi_nvlink") or {}
    gpus = parsers.nvlink_status(str(run.get("stdout", "")) if run.get("rc") == 0 else "")
    if not gpus:
        return None
    speeds = {gpu.index: [link_gbytes(s) for s in gpu.links.values()] for gpu in gpus}
    index = min(speeds, key=lambda i: sum(speeds[i]))
    active = [s for s in speeds[index] if s > 0]
    if not active:
        return None
    shown = f"{len(active)} x {active[0]:g} GB/s" if len(set(active)) == 1 else f"{len(active)} links"
    return HostRate(sum(active) * 8, f"GPU {index}: {shown} NVLink (nvidia-smi nvlink -s)", NVLINK_EFFICIENCY)


def link_gbytes(speed: str) -> float:
    """One link's speed as `nvlink -s` prints it (`25.781 GB/s`, `<inactive>`), in GB/s; 0 when inactive."""
    value, _, unit = speed.strip().partition(" ")
    try:
        return float(value) if unit == "GB/s" else 0.0
    except ValueError:
        return 0.0


def selected(interface: str, ifname: str) -> bool:
    """Whether NCCL_SOCKET_IFNAME (or NCCL_IB_HCA) picks the interface (or CA) by NCCL's rules: a comma list
    of prefixes; a leading `^` excludes what the list matches and a leading `=` (after any `^`) makes every
    entry exact, both for the whole list (NCCL's parseStringList); an HCA entry's `:port` is not a name."""
    exclude = ifname.strip().startswith("^")
    rest = ifname.strip().removeprefix("^")
    exact = rest.startswith("=")
    names = [e.split(":")[0].strip() for e in rest.removeprefix("=").split(",") if e.strip()]
    if not names:
        return False
    hit = any(interface == n if exact else interface.startswith(n) for n in names)
    return not hit if exclude else hit


def from_hardware(hosts: Sequence[tuple[str, HostRate | None]]) -> Threshold | NoBar:
    """The threshold from every host's rate (name, rate); NoBar naming the hosts whose rate is unknown."""
    unknown = [name for name, rate in hosts if rate is None]
    if not hosts or unknown:
        return NoBar(
            f"no network rate known on {', '.join(unknown) or 'any host'} (no active InfiniBand/RoCE port, "
            "no link speed for NCCL's interface)"
        )
    name, slowest = min(
        ((n, r) for n, r in hosts if r is not None), key=lambda item: item[1].gbits * item[1].efficiency
    )
    expected = slowest.gbits / 8 * slowest.efficiency
    return Threshold(
        round(expected * MARGIN, 3),
        f"hardware: {name}'s {slowest.how} = {slowest.gbits / 8:g} GB/s x {slowest.efficiency:g} "
        f"(NCCL's published efficiency) x {MARGIN:g} margin",
    )


def topology(data: Mapping[str, Any]) -> gpu_topology.Topology | None:
    """The host's `nvidia-smi topo -m` matrix; None when it did not run or printed none."""
    run = data.get("smi_topo") or {}
    return gpu_topology.parse(str(run.get("stdout", ""))) if run.get("rc") == 0 else None


def one_host(name: str, data: Mapping[str, Any]) -> Threshold | NoBar:
    """One host's all-GPU all-reduce bar, by how its GPUs are joined (the module's docstring)."""
    topo = topology(data)
    if topo is None:
        return NoBar("`nvidia-smi topo -m` did not run: which GPU pairs NVLink joins is unknown")
    joined = topo.joined()
    if joined is gpu_topology.Joined.SOME_PAIRS:
        return NoBar(
            f"{topo.summary()}: the all-reduce crosses PCIe between NVLink-joined pairs "
            "(NVIDIA/nccl-tests#178), and no published figure covers that"
        )
    if joined is not gpu_topology.Joined.ALL_PAIRS:
        return NoBar(f"{topo.summary()}: no published all-reduce figure for it")
    run = data.get("smi_q") or {}
    query = parsers.smi_query(str(run.get("stdout", "")) if run.get("rc") == 0 else "")
    products = {gpu.get("Product Name", "") for gpu in query.gpus}
    system = busbw_systems.match(products, set(topo.pair_links()))
    if system is not None:
        return Threshold(
            system.threshold,
            f"published: {system.name}, ring all-reduce {system.gbps:g} GB/s x {busbw_systems.MARGIN:g} "
            f"margin ({system.source})",
        )
    bar = from_hardware([(name, nvlink_rate(data))])
    if isinstance(bar, NoBar):
        return NoBar(f"{topo.summary()}, but a GPU has no active NVLink (nvidia-smi nvlink -s)")
    return bar
