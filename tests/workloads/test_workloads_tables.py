"""``python -m sst_cdma.tools.workloads table`` and ``memory``: the markdown tables docs/workloads.md shows
(tests/docs/test_doc_tables.py compares them with the page); here, what they refuse and that
their cells are the figures the network and the stream statistics give."""
from __future__ import annotations

import pytest

from sst_cdma.tools.workloads import main
from workloads.errors import WorkloadError
from workloads.loader import load_network
from workloads.render import iteration_stream
from workloads.stats import stream_stats
from workloads.tables import memory_table, networks_table, parse_case, transformers_table


def _cells(table: str) -> list[list[str]]:
    return [[c.strip() for c in line.strip("|").split("|")] for line in table.splitlines()[2:]]


def test_a_cnn_row_holds_its_networks_figures():
    net = load_network("alexnet")
    [row] = _cells(networks_table(["alexnet"]))
    assert row[0] == "`alexnet`" and row[1] == f"{net.param_count() / 1e6:.2f}M"
    assert row[2] == f"{net.macs() / 1e9:.3f}"
    fwd = sum(i.flops_fwd for i in net.infer(1))
    assert row[3].split(" / ")[0] == f"{fwd / 1e9:.2f}"


def test_fused_attention_keeps_fewer_activations_than_naive():
    [row] = _cells(transformers_table(["gpt2_small"]))
    naive, fused = (float(x) for x in row[4].split(" / "))
    assert row[1] == "124,439,808" and row[2] == "1024" and fused < naive


def test_a_memory_row_is_the_streams_statistics():
    [row] = _cells(memory_table([("alexnet", 8)]))
    none = stream_stats(iteration_stream("alexnet", 8, "float32", "none"))
    assert row[:3] == ["alexnet", "8", f"{none.peak_bytes / 1e9:.2f}"]
    assert row[-1] == f"{none.declared_bytes / 1e9:.2f}"


@pytest.mark.parametrize("bad", ["vgg16", "vgg16:0", "vgg16:x", ":8"])
def test_a_case_needs_a_network_and_a_positive_batch(bad):
    with pytest.raises(WorkloadError, match="NETWORK:BATCH"):
        parse_case(bad)


def test_a_table_of_one_kind_refuses_the_other(capsys):
    assert main(["table", "alexnet", "gpt2_small"]) == 1
    assert "gpt2_small is not a CNN" in capsys.readouterr().err
    assert main(["table", "gpt2_small", "alexnet"]) == 1
    assert "alexnet is not a transformer" in capsys.readouterr().err
    assert main(["memory", "alexnet:x"]) == 1
    assert "expected NETWORK:BATCH" in capsys.readouterr().err
    assert main(["table", "no_such_net"]) == 1
