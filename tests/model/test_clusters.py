"""Presets of many-node machines (sst_cdma/model/clusters.py) and the graph built from them
(sst_cdma/model/cluster_graph.py): sizes against NVIDIA's DGX SuperPOD reference
architectures, routes, the links a GPU's offloads share with its NIC, rank placement, and
construction that stays linear in GPUs (docs/clusters.md)."""
from __future__ import annotations

import time

import pytest

from sst_cdma.model.cluster_graph import (build_cluster, group_shape, host_link_Bps, links_of,
                                          nic_route, offload_route, place_ranks, rank_place,
                                          route, shared_links)
from sst_cdma.model.clusters import (FABRICS, NICS, NODES, ClusterError, fabric_preset,
                                     nic_preset, node_preset)
from sst_cdma.model.links import PCIeLink


def _count(cluster, kind):
    return sum(1 for _, d in cluster.graph.nodes(data=True) if d["kind"] == kind)


def test_nic_line_rates_are_the_standards_bits_per_second_over_eight():
    assert nic_preset("ib_hdr_200").line_rate_Bps == 25e9
    assert nic_preset("ib_ndr_400").line_rate_Bps == 50e9
    assert nic_preset("roce_200").line_rate_Bps == 25e9 and NICS["roce_400"].protocol == "roce"


def test_dgx_nodes_have_one_nic_per_gpu_and_their_nvlink():
    a100, h100 = node_preset("dgx_a100"), node_preset("dgx_h100")
    assert (a100.gpus, a100.nics, a100.nvswitches) == (8, 8, 6)
    assert (h100.gpus, h100.nics, h100.nvswitches) == (8, 8, 4)
    assert a100.nvlink_Bps == 300e9 and h100.nvlink_Bps == 450e9   # 600 / 900 GB/s both ways
    assert h100.pcie_switches == 4 and a100.pcie_switches == 4


def test_leaf_ports_split_by_oversubscription():
    ndr = fabric_preset("rail_ndr")
    assert (ndr.down_ports, ndr.up_ports) == (32, 32)
    assert (fabric_preset("rail_hdr").down_ports, fabric_preset("rail_hdr").up_ports) == (20, 20)
    three = fabric_preset("fat_tree_ndr", oversubscription=3.0)
    assert (three.down_ports, three.up_ports) == (48, 16)


@pytest.mark.parametrize("call, words", [
    (lambda: node_preset("dgx2"), "node 'dgx2' is no preset; choose from dgx_a100, dgx_h100"),
    (lambda: nic_preset("eth"), "nic 'eth' is no preset"),
    (lambda: fabric_preset("torus"), "fabric 'torus' is no preset"),
    (lambda: fabric_preset("rail_ndr", 0.5), "oversubscription: 0.5 must be a number >= 1"),
    (lambda: fabric_preset("rail_ndr", float("nan")), "oversubscription: nan"),
    (lambda: build_cluster("dgx_h100", 0), "nodes: 0 must be a whole number >= 1"),
    (lambda: build_cluster("dgx_h100", 2.5), "nodes: 2.5 must be a whole number"),
])
def test_bad_presets_and_sizes_are_refused_naming_the_parameter(call, words):
    with pytest.raises(ClusterError, match=words.replace("(", r"\(")):
        call()


@pytest.mark.parametrize("nodes, leaves, spines", [(31, 8, 4), (63, 16, 8), (127, 32, 16)])
def test_rail_optimized_ndr_switch_counts_are_the_superpod_reference_architectures(
        nodes, leaves, spines):
    # DGX SuperPOD H100 RA, "Compute fabric component count": 1, 2 and 4 SUs of 32 nodes
    # (31 DGX and the UFM): 8/4, 16/8 and 32/16 leaf/spine switches
    c = build_cluster("dgx_h100", nodes, "rail_ndr")
    assert (_count(c, "leaf"), _count(c, "spine"), _count(c, "core")) == (leaves, spines, 0)


def test_2048_nodes_build_three_tiers_in_seconds_and_linear_in_gpus():
    start = time.perf_counter()
    big = build_cluster("dgx_h100", 2048, "rail_ndr")
    seconds = time.perf_counter() - start
    # 64 SUs: 512 leaves, 512 spines, 256 cores (DGX SuperPOD B200 RA, "Larger DGX SuperPOD
    # component counts", 64 SU / 2048 nodes / 16384 GPUs)
    assert (_count(big, "leaf"), _count(big, "spine"), _count(big, "core")) == (512, 512, 256)
    assert big.gpus == 16384 and seconds < 10.0, seconds
    small = build_cluster("dgx_h100", 256, "rail_ndr")
    per_gpu = [c.graph.number_of_edges() / c.gpus for c in (small, big)]
    assert max(per_gpu) < 7 and per_gpu[1] < 1.2 * per_gpu[0]


def test_routes_go_through_the_nvswitch_inside_a_node_and_the_own_nic_across():
    c = build_cluster("dgx_h100", 64, "rail_ndr")
    assert route(c, c.gpu(0, 0), c.gpu(0, 5)) == ["n0/gpu0", "n0/nvswitch", "n0/gpu5"]
    same_rail = route(c, c.gpu(0, 2), c.gpu(5, 2))
    assert same_rail == ["n0/gpu2", "n0/pcie1", "n0/nic2", "leaf2", "n5/nic2", "n5/pcie1",
                         "n5/gpu2"]
    other_rail = route(c, c.gpu(0, 2), c.gpu(5, 3))
    assert other_rail[3] == "leaf2" and other_rail[4].startswith("spine")
    assert other_rail[5] == "leaf3" and other_rail[6] == "n5/nic3"
    other_su = route(c, c.gpu(0, 2), c.gpu(40, 2))   # rail 2 of SU 0 and SU 1
    assert other_su[3:6] == ["leaf2", other_su[4], "leaf10"]
    assert route(c, c.gpu(3, 1), c.gpu(3, 1)) == ["n3/gpu1"]


def test_fat_tree_puts_a_nodes_nics_on_one_leaf():
    c = build_cluster("dgx_a100", 10, "fat_tree_hdr")
    hops = route(c, c.gpu(0, 0), c.gpu(2, 7))     # NIC 0 on leaf 0, NIC 23 on leaf 1
    assert hops[3] == "leaf0" and hops[-4] == "leaf1"
    assert route(c, c.gpu(0, 0), c.gpu(1, 3))[3:5] == ["leaf0", "n1/nic3"]


def test_route_links_carry_bandwidths_of_their_parts():
    c = build_cluster("dgx_h100", 2, "rail_ndr")
    g = c.graph
    path = route(c, c.gpu(0, 0), c.gpu(1, 0))
    rates = [g.edges[u, v]["bandwidth_Bps"] for u, v in links_of(path)]
    assert rates[0] == PCIeLink(5, 16).effective == host_link_Bps("pcie5x16")
    assert rates[2] == 50e9                           # NIC to leaf: NDR line rate
    assert g.edges["n0/gpu0", "n0/nvswitch"]["bandwidth_Bps"] == 450e9


def test_offloads_share_the_gpus_pcie_link_with_its_nic_and_the_uplink_with_a_neighbour():
    c = build_cluster("dgx_h100", 1, "rail_ndr")
    gpu0, gpu1, gpu2 = c.gpu(0, 0), c.gpu(0, 1), c.gpu(0, 2)
    assert shared_links(offload_route(c, gpu0), nic_route(c, gpu0)) == [("n0/gpu0", "n0/pcie0")]
    assert shared_links(offload_route(c, gpu0), offload_route(c, gpu1)) == [
        ("n0/pcie0", "n0/cpu0"), ("n0/cpu0", "n0/mem0")]
    assert shared_links(offload_route(c, gpu0), offload_route(c, gpu2)) == [
        ("n0/cpu0", "n0/mem0")]                        # another switch, the same socket
    far = offload_route(c, c.gpu(0, 7))
    assert far[2] == "n0/cpu1" and shared_links(offload_route(c, gpu0), far) == []


def test_without_gpudirect_the_nic_traffic_shares_the_uplink_and_memory_with_offloads():
    c = build_cluster("dgx_a100", 1, "rail_hdr")
    gpu = c.gpu(0, 3)
    staged = nic_route(c, gpu, gpudirect=False)
    assert staged == ["n0/gpu3", "n0/pcie1", "n0/cpu0", "n0/mem0", "n0/cpu0", "n0/pcie1",
                      "n0/nic3"]
    assert shared_links(offload_route(c, gpu), staged) == links_of(offload_route(c, gpu))


def test_shared_links_are_directed_unless_asked():
    there, back = ["a", "b", "c"], ["c", "b"]
    assert shared_links(there, back) == []
    assert shared_links(there, back, directed=False) == [("b", "c")]


def test_ranks_fill_nodes_in_order_and_groups_have_shapes():
    c = build_cluster("dgx_h100", 4, "rail_ndr")
    assert rank_place(c, 9) == rank_place(c, 9) and rank_place(c, 9).gpu == "n1/gpu1"
    assert [p.node for p in place_ranks(c, 17)][-2:] == [1, 2]
    assert group_shape(c, range(8, 16)) == (1, 8)                 # a tensor-parallel group
    assert group_shape(c, range(3, 32, 8)) == (4, 1)              # a data-parallel group
    assert group_shape(c, [0, 1, 8, 9]) == (2, 2)
    with pytest.raises(ClusterError, match=r"holds \[1, 2\] ranks on different nodes"):
        group_shape(c, [0, 1, 8])
    for bad, words in [(lambda: rank_place(c, 32), "rank: 32 is not in 0..31"),
                       (lambda: place_ranks(c, 33), "world: 33 ranks do not fit"),
                       (lambda: group_shape(c, []), "ranks: a group needs"),
                       (lambda: c.gpu(4, 0), "node 4, local GPU 0 is not in"),
                       (lambda: route(c, "n0/gpu0", "leaf0"), "'leaf0' is no GPU vertex")]:
        with pytest.raises(ClusterError, match=words):
            bad()


def test_every_preset_builds():
    for node in NODES:
        for fabric in FABRICS:
            c = build_cluster(node, 3, fabric)
            assert c.gpus == 24 and _count(c, "nic") == 24
