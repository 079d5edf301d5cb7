"""Graded: exercise ddp_buckets (dlsys/schedule/fusion.py: ``Fusion.items``), held to
buckets worked by hand, to PyTorch DDP's rules on real layer profiles (Li et al. 2020) and
to an emulated run that sends them."""

import pytest

from dlsys.comm import SIGNAL
from dlsys.experiments import schedule as ex
from dlsys.schedule import Layer
from dlsys.schedule.fusion import Fusion

pytestmark = pytest.mark.ex_ddp_buckets

PROFILES = ["resnet50", "vgg19", "googlenet"]
CAPS_MB = [1.0, 25.0, 100.0]


def chain(*params):
    """Layers in forward order with these parameter counts, packed in one flat buffer."""
    offsets = [sum(params[:i]) for i in range(len(params))]
    return [Layer(f"layer{i}", p, o, 1e6) for i, (p, o) in enumerate(zip(params, offsets))]


def as_tuples(items):
    return [(item.index, sorted(item.layers), item.lo, item.hi, item.priority) for item in items]


def test_four_layers_by_hand():
    # 1, 2, 3 and 4 MB, buckets of 5 MB filled from the last layer: [4 MB], [3 + 2 MB], [1 MB]
    layers = chain(250_000, 500_000, 750_000, 1_000_000)
    got = as_tuples(Fusion(bucket_mb=5).items(layers))
    assert got == [(0, [3], 1_500_000, 2_500_000, (0,)), (1, [1, 2], 250_000, 1_500_000, (1,)),
                   (2, [0], 0, 250_000, (2,))], "reverse order; a bucket closes when the next layer would not fit"


def test_layers_without_parameters_are_in_no_bucket():
    layers = chain(100, 0, 200, 0, 300)
    items = Fusion(bucket_mb=0.001).items(layers)  # 1,000 bytes: 250 parameters
    assert as_tuples(items) == [(0, [4], 300, 600, (0,)), (1, [2], 100, 300, (1,)), (2, [0], 0, 100, (2,))]


def test_the_last_layer_goes_first():
    for model in PROFILES:
        layers = list(ex.layers(model, 32))
        items = Fusion(bucket_mb=25).items(layers)
        assert max(i for i, l in enumerate(layers) if l.params) in items[0].layers, f"{model}: bucket 0 holds the last layer"
        assert [item.index for item in items] == list(range(len(items)))
        assert [item.priority for item in items] == [(k,) for k in range(len(items))], "bucket k has priority (k,)"
        firsts = [min(item.layers) for item in items]
        assert firsts == sorted(firsts, reverse=True), f"{model}: buckets in reverse parameter order"


def test_buckets_tile_the_gradient():
    for model in PROFILES:
        layers = list(ex.layers(model, 32))
        for cap_mb in CAPS_MB:
            items = Fusion(bucket_mb=cap_mb).items(layers)
            for item in items:
                mine = [layers[i] for i in item.layers]
                assert (item.lo, item.hi) == (min(l.offset for l in mine), max(l.offset + l.params for l in mine)), item
            spans = sorted((item.lo, item.hi) for item in items)
            assert spans[0][0] == 0 and spans[-1][1] == sum(l.params for l in layers), (model, cap_mb)
            assert all(a[1] == b[0] for a, b in zip(spans, spans[1:])), f"{model}, {cap_mb} MB: every element once"


def test_at_most_the_cap_and_full_when_closed():
    for model in PROFILES:
        layers = list(ex.layers(model, 32))
        for cap_mb in CAPS_MB:
            items = Fusion(bucket_mb=cap_mb).items(layers)
            for item in items:
                assert 4 * item.size <= cap_mb * 1e6 or len(item.layers) == 1, (
                    f"{model}, {cap_mb} MB: over the cap (only a larger layer may be)")
            for item, following in zip(items, items[1:]):
                first = max(following.layers)  # the next layer in reverse order
                assert 4 * (item.size + layers[first].params) > cap_mb * 1e6, (
                    f"{model}, {cap_mb} MB: closed while the next layer still fit")


def test_an_emulated_run_sends_the_buckets_in_order():
    job = ex.make_job("fusion", "resnet50", 1, servers=1)
    n = len(job.policy.items(list(job.layers)))
    record = ex.simulate_schedule("fusion", "resnet50", 1, "10Gbps", servers=1, iterations=2)
    pushes = [m.label for m in record["result"].trace.messages
              if m.src == job.rank_of("sender", 0) and m.phase != SIGNAL]
    order = [int(label.rpartition("[item ")[2].rstrip("]")) for label in pushes]  # "push bucket 0: fc..conv1 [item 0]"
    assert order == list(range(n)) * 2, "bucket 0 first, every iteration"
