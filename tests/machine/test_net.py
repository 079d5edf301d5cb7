"""Link/node presets, size parsing, bus-bandwidth factors (the closed forms: test_collectives)."""

import pytest

from dlsys.machine.net import LINK_PRESETS, NODE_PRESETS, busbw_factor, get_link, get_node, parse_bandwidth, parse_size

REQUIRED_LINKS = {
    "tcp-1gbe",
    "tcp-10gbe",
    "tcp-25gbe",
    "rdma-fdr",
    "rdma-edr",
    "rdma-hdr",
    "nvlink",
    "pcie3",
    "sw26010",
}
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


# Every spelling a user may type, with what it means: b is a bit, B a byte, case-sensitive.
SIZES = [
    ("1024", 1024),
    ("0", 0),
    (4096, 4096),
    ("1B", 1),
    ("64kB", 64_000),
    ("61MB", 61_000_000),
    ("1GB", 10**9),
    ("2TB", 2 * 10**12),
    ("64KiB", 64 * 2**10),
    ("64MiB", 64 * 2**20),
    ("1GiB", 2**30),
    ("1TiB", 2**40),
    (" 2 KiB ", 2048),
    ("64 MiB", 64 * 2**20),
    ("1.5kB", 1500),
    ("1e3", 1000),
]
SIZES_REFUSED = [
    ("1Gb", "Gb is bits, GB bytes"),
    ("1Mb", "Mb is bits"),
    ("3b", "b is bits"),
    ("1KB", "KB is ambiguous"),
    ("1kb", "kb is bits"),
    ("1gb", "did you mean GB"),
    ("1gib", "did you mean GiB"),
    ("1MIB", "did you mean MiB"),
    ("1mb", "did you mean MB"),
    ("1G", "write 1024"),
    ("1GB/s", "not per second"),
    ("10Gbps", "not per second"),
    ("-5", "write"),
    ("abc", "write"),
    ("1.5B", "not a whole number"),
    ("10 furlongs", "write"),
    ("", "write"),
]
BANDWIDTHS = [
    ("10Gbps", 1.25e9),
    ("10Gb/s", 1.25e9),
    ("10Gbit/s", 1.25e9),
    ("100Mbps", 12.5e6),
    ("1kbps", 125),
    ("1.25GB/s", 1.25e9),
    ("1.25GBps", 1.25e9),
    ("14 GB/s", 14e9),
    ("1GiB/s", 2**30),
    ("1TB/s", 1e12),
    ("8bps", 1),
    ("10gbps", 1.25e9),  # the prefix in any case; b a bit, B a byte, as written
    ("10 gb/s", 1.25e9),
    ("10GB/S", 1e10),
    ("100mbit/s", 12.5e6),
]
BANDWIDTHS_REFUSED = [
    ("10GBPS", "Gbps or GBps"),
    ("10Gibps", "write 10Gbps"),
    ("10GB", "unit per second"),
    ("10", "unit per second"),
    ("0Gbps", "> 0"),
    ("fast", "write"),
]


@pytest.mark.parametrize("text,value", SIZES)
def test_parse_size_reads_every_spelling(text, value):
    assert parse_size(text) == value


@pytest.mark.parametrize("text,why", SIZES_REFUSED)
def test_parse_size_refuses_bits_ambiguity_and_junk_naming_the_spellings(text, why):
    with pytest.raises(ValueError, match="size") as info:
        parse_size(text)
    assert why in str(info.value)


@pytest.mark.parametrize("text,value", BANDWIDTHS)
def test_parse_bandwidth_reads_bits_and_bytes(text, value):
    assert parse_bandwidth(text) == pytest.approx(value)


@pytest.mark.parametrize("text,why", BANDWIDTHS_REFUSED)
def test_parse_bandwidth_refuses_a_case_folded_unit_naming_both_readings(text, why):
    with pytest.raises(ValueError, match="bandwidth") as info:
        parse_bandwidth(text)
    assert why in str(info.value)


LINKS = [
    ("rdma-edr", "rdma-edr", 12.5e9),
    ("RDMA-EDR", "rdma-edr", 12.5e9),
    (" Tcp-10GbE ", "tcp-10gbe", 1.25e9),
    ("10Gbps", "10Gbps", 1.25e9),
    ("10 Gb/s", "10 Gb/s", 1.25e9),
    ("10gbps", "10gbps", 1.25e9),
    ("1.25GB/s", "1.25GB/s", 1.25e9),
]
LINKS_REFUSED = [
    ("wifi", "unknown link preset 'wifi'; valid: tcp-1gbe"),
    ("rdma_edr", "or a bandwidth like 10Gbps, 10 Gb/s or 1.25GB/s"),
    ("10GBPS", "Gbps or GBps"),
    ("10", "unit per second"),
    ("0Gbps", "> 0"),
    ("10 parsecs", "or a link preset: tcp-1gbe"),
]


@pytest.mark.parametrize("text,name,bandwidth_Bps", LINKS)
def test_the_link_grammar_reads_a_preset_in_any_case_or_a_bandwidth(text, name, bandwidth_Bps):
    link = get_link(text)
    assert (link.name, link.bandwidth_Bps) == (name, pytest.approx(bandwidth_Bps))
    if name not in LINK_PRESETS:  # a bandwidth: tcp-10gbe's latency and overheads
        assert link.latency_s == LINK_PRESETS["tcp-10gbe"].latency_s


@pytest.mark.parametrize("text,why", LINKS_REFUSED)
def test_the_link_grammar_refuses_naming_the_argument_and_the_accepted_forms(text, why):
    with pytest.raises(ValueError, match="^--link: ") as info:
        get_link(text, "--link")
    assert why in str(info.value)


def test_node_presets_in_any_case():
    assert get_node("V100") is get_node("v100") is NODE_PRESETS["v100"]


def test_unknown_presets_are_rejected():
    with pytest.raises(ValueError, match="unknown link preset"):
        get_link("ethernet")


def test_busbw_factors_follow_nccl_tests():
    assert busbw_factor("allreduce", 8) == 2 * 7 / 8
    assert busbw_factor("allgather", 8) == busbw_factor("reduce_scatter", 8) == 7 / 8
    assert busbw_factor("broadcast", 8) == busbw_factor("reduce", 8) == 1
