"""The contention experiment (dlsys.experiments.contention) and the link-load figure
(dlsys.viz.links): incast, three all-reduces and an all-to-all on flat, two-level and
fat-tree fabrics, sharing on and off, against their arithmetic bounds."""

import pytest

from dlsys.comm.replay import link_load
from dlsys.experiments import contention as ex
from dlsys.machine.net import get_link
from dlsys.viz.links import link_load_figure

MiB = 2**20
B = get_link("rdma-edr").bandwidth_Bps


def test_an_incast_ends_at_the_ingress_bound_whether_fifo_or_shared():
    off, on = ex.sharing_pair("incast", "flat", 8, 4 * MiB)
    assert on["hottest_link"] == off["hottest_link"] == "ingress0"
    assert on["link_bound_s"] == pytest.approx(7 * 4 * MiB / B, rel=1e-12)
    last = [max(m.arrive_s for m in r["result"].trace.messages) for r in (off, on)]
    assert last[0] == pytest.approx(last[1], rel=1e-12), "FIFO and fair share: the same last arrival"
    first = [min(m.arrive_s for m in r["result"].trace.messages) for r in (off, on)]
    assert first[0] < first[1] / 5, "FIFO lets the first push in after n/B, fair share after (p-1) n/B"


def test_the_ring_has_the_uplink_to_itself_recursive_doubling_shares_it():
    ring_off, ring_on = ex.sharing_pair("ring", "two-level", 8, 4 * MiB)
    flat_ring = ex.run_pattern("ring", "flat", 8, 4 * MiB, True)
    assert ring_on["virtual_time_s"] == pytest.approx(flat_ring["virtual_time_s"], rel=1e-9)
    assert ring_off["virtual_time_s"] > 3 * ring_on["virtual_time_s"], "the static model charges B/4 across"
    assert ring_on["switch_messages"] == 2 * 7 * 2, "two of eight messages cross, in each of 2(p-1) steps"
    rd_off, rd_on = ex.sharing_pair("recursive_doubling", "two-level", 8, 4 * MiB)
    assert rd_on["virtual_time_s"] == pytest.approx(rd_off["virtual_time_s"], rel=1e-9)
    assert rd_on["hottest_link"] in ("up0", "up1", "down0", "down1")


def test_an_all_to_all_meets_the_busiest_cut_on_an_oversubscribed_fat_tree():
    off, on = ex.sharing_pair("alltoall", "fat-tree", 16, 16 * 16384, oversubscription=4)
    assert "edge" in on["hottest_link"] and "->agg" in on["hottest_link"]
    assert on["link_bound_s"] == pytest.approx(2 * 16 * 16384 * 14 / 16 / (2 * B / 4), rel=1e-12)
    assert on["link_bound_s"] <= on["virtual_time_s"] < off["virtual_time_s"]


@pytest.mark.parametrize("pattern", ex.PATTERNS)
@pytest.mark.parametrize("fabric", ex.FABRICS)
def test_every_pattern_on_every_fabric_keeps_the_links_within_capacity(pattern, fabric):
    record = ex.run_pattern(pattern, fabric, 4, 4096, True, bins=10)
    assert record["link_bound_s"] <= record["virtual_time_s"]
    width_s = record["rows"][0]["end_s"] - record["rows"][0]["start_s"]
    for row in record["rows"]:
        assert row["nbytes"] <= record["capacities_Bps"][row["link_id"]] * width_s * (1 + 1e-9)
    egress = sum(r["nbytes"] for r in record["rows"] if r["link"].startswith("egress"))
    assert egress == pytest.approx(sum(m.nbytes for m in record["result"].trace.messages), rel=1e-9)


@pytest.mark.parametrize(
    "call, name",
    [
        (lambda: ex.run_pattern("gossip"), "pattern"),
        (lambda: ex.run_pattern("ring", "torus"), "fabric"),
        (lambda: ex.run_pattern("ring", ranks=1), "ranks"),
        (lambda: ex.run_pattern("ring", "fat-tree", ranks=17, oversubscription=1.0, size=4096), None),
        (lambda: ex.run_pattern("alltoall", ranks=3, size=16), "size"),
        (lambda: ex.run_pattern("ring", size=0), "size"),
        (lambda: ex.run_pattern("ring", sharing="yes"), "sharing"),
        (lambda: ex.run_pattern("ring", bins=0), "bins"),
        (lambda: ex.run_pattern("ring", "two-level", oversubscription=0.5), "oversubscription"),
    ],
)
def test_bad_input_is_refused_by_name(call, name):
    if name is None:  # 17 ranks take the next fat tree (k = 6): accepted
        assert call()["ranks"] == 17
        return
    with pytest.raises(ValueError, match=name):
        call()


def test_the_figure_draws_the_busiest_links_with_utilisation_in_0_1():
    record = ex.run_pattern("recursive_doubling", "two-level", 8, MiB, True, bins=20)
    fig = link_load_figure(record["rows"], "t", record["capacities_Bps"])
    heat = fig.data[0]
    assert len(heat.y) == len(record["capacities_Bps"]) and len(heat.x) == 20
    assert max(max(row) for row in heat.z) == pytest.approx(1.0, rel=1e-9), "a full link is 1"
    top = link_load_figure(record["rows"], "t", record["capacities_Bps"], top=3)
    assert len(top.data[0].y) == 3 and record["hottest_link"] in top.data[0].y
    assert "3 busiest of" in top.layout.yaxis.title.text
    rate = link_load_figure(link_load(record["result"], 20), "t")
    assert rate.data[0].colorbar.title.text == "B/s"
    empty = link_load_figure([], "nothing")
    assert not empty.data and "no bytes" in empty.layout.annotations[0].text
    with pytest.raises(ValueError, match="top"):
        link_load_figure(record["rows"], top=0)
