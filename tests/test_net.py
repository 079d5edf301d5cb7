"""Link/node presets, size parsing, and the closed forms against hand-derived values."""

import math

import pytest

from dlsys.net import (CLOSED_FORMS, LINK_PRESETS, NODE_PRESETS, LinkModel, busbw_factor, closed_form,
                       get_link, parse_size)

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


def test_ring_allreduce_closed_form_by_hand():
    link = LinkModel("l", latency_s=10e-6, bandwidth_Bps=1e9)
    p, n = 4, 4e6
    assert closed_form("allreduce", "ring", p, n, link) == pytest.approx(2 * 3 * (10e-6 + 1e6 / 1e9))


def test_recursive_doubling_beats_ring_for_small_messages_and_loses_for_large():
    link = LINK_PRESETS["tcp-10gbe"]
    assert closed_form("allreduce", "recursive_doubling", 64, 1024, link) < closed_form("allreduce", "ring", 64, 1024, link)
    assert closed_form("allreduce", "recursive_doubling", 64, 2**28, link) > closed_form("allreduce", "ring", 64, 2**28, link)


def test_gamma_term_needs_a_node():
    link = LINK_PRESETS["rdma-edr"]
    base = closed_form("allreduce", "ring", 8, 1e8, link)
    with_gamma = closed_form("allreduce", "ring", 8, 1e8, link, NODE_PRESETS["v100"], reduce=True)
    assert with_gamma - base == pytest.approx(7 / 8 * 1e8 * 3 / 900e9)


def test_closed_form_errors():
    with pytest.raises(ValueError, match="valid: barrier/dissemination"):
        closed_form("allreduce", "magic", 4, 1, "tcp-1gbe")
    with pytest.raises(ValueError, match="p must be >= 1"):
        closed_form("allreduce", "ring", 0, 1, "tcp-1gbe")
    with pytest.raises(ValueError, match="unknown link preset"):
        get_link("ethernet")


def test_busbw_factors_follow_nccl_tests():
    assert busbw_factor("allreduce", 8) == 2 * 7 / 8
    assert busbw_factor("allgather", 8) == busbw_factor("reduce_scatter", 8) == 7 / 8
    assert busbw_factor("broadcast", 8) == busbw_factor("reduce", 8) == 1


def test_every_closed_form_is_zero_for_one_rank_and_positive_otherwise():
    link = LINK_PRESETS["tcp-1gbe"]
    for collective, algorithm in CLOSED_FORMS:
        assert closed_form(collective, algorithm, 1, 1e6, link) == 0
        assert closed_form(collective, algorithm, 8, 1e6, link) > 0
    assert math.isfinite(closed_form("allreduce", "ring", 512, 244e6, "sw26010"))
