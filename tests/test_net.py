"""Link/node presets, size parsing, bus-bandwidth factors (the closed forms: test_collectives)."""

import pytest

from dlsys.machine.net import LINK_PRESETS, NODE_PRESETS, busbw_factor, get_link, parse_size

REQUIRED_LINKS = {"tcp-1gbe", "tcp-10gbe", "tcp-25gbe", "rdma-fdr", "rdma-edr", "rdma-hdr", "nvlink", "pcie3", "sw26010"}
REQUIRED_NODES = {"sw26010", "k40m", "p100", "v100", "a100", "laptop-cpu"}


def test_every_required_preset_exists_with_a_source():
    assert REQUIRED_LINKS <= set(LINK_PRESETS) and REQUIRED_NODES <= set(NODE_PRESETS)
    assert all(len(m.source) > 20 for m in [*LINK_PRESETS.values(), *NODE_PRESETS.values()])


def test_tcp_pays_copies_and_tens_of_microseconds_rdma_pays_neither():
    for name in ("tcp-1gbe", "tcp-10gbe", "tcp-25gbe"):
        link = LINK_PRESETS[name]
        assert link.kernel_copies == 1 and 10e-6 <= link.alpha_s <= 100e-6
    for name in ("rdma-fdr", "rdma-edr", "rdma-hdr"):
        link = LINK_PRESETS[name]
        assert link.kernel_copies == 0 and 0.5e-6 <= link.alpha_s <= 2e-6


def test_sw26010_node_numbers_match_the_paper():
    node = NODE_PRESETS["sw26010"]
    assert node.peak_flops == 3.06e12 and node.memory_bandwidth_Bps == 136e9


@pytest.mark.parametrize("text,value", [("1024", 1024), ("61MB", 61_000_000), ("64MiB", 64 * 2**20),
                                        ("1GiB", 2**30), ("0", 0), (" 2 KiB ", 2048), (4096, 4096)])
def test_parse_size(text, value):
    assert parse_size(text) == value


@pytest.mark.parametrize("text", ["-5", "abc", "1.5B", "10 furlongs", ""])
def test_parse_size_rejects_bad_input(text):
    with pytest.raises(ValueError, match="size"):
        parse_size(text)


def test_unknown_presets_are_rejected():
    with pytest.raises(ValueError, match="unknown link preset"):
        get_link("ethernet")


def test_busbw_factors_follow_nccl_tests():
    assert busbw_factor("allreduce", 8) == 2 * 7 / 8
    assert busbw_factor("allgather", 8) == busbw_factor("reduce_scatter", 8) == 7 / 8
    assert busbw_factor("broadcast", 8) == busbw_factor("reduce", 8) == 1
