"""Graded: exercise ddp_buckets (dlsys/schedule/fusion.py: ``Fusion.items``), held to
buckets worked by hand, to PyTorch DDP's rules on real layer profiles (Li et al. 2020) and
to an emulated run that sends them."""

import pytest

from dlsys.experiments import schedule as ex
from dlsys.schedule import Layer

pytestmark = pytest.mark.ex_ddp_buckets

PROFILES = ["resnet50", "vgg19", "googlenet"]
CAPS_MIB = [1.0, 25.0, 100.0]  # DDP's bucket_cap_mb, which is MiB


def chain(*params):
    """Layers in forward order with these parameter counts, packed in one flat buffer."""
    offsets = [sum(params[:i]) for i in range(len(params))]
    return [Layer(f"layer{i}", p, o, 1e6) for i, (p, o) in enumerate(zip(params, offsets))]


def observe_buckets(cases):
    """Runs in the untrusted child: Fusion(bucket_mb).items(layers) for each (layers, bucket_mb),
    each item as [index, sorted layers, lo, hi, priority, size]."""
    from dlsys.schedule.fusion import Fusion

    return [
        [
            [item.index, sorted(item.layers), item.lo, item.hi, list(item.priority), item.size]
            for item in Fusion(bucket_mb=cap_mb).items(layers)
        ]
        for layers, cap_mb in cases
    ]


def observe_pushes():
    """Runs in the untrusted child: how many buckets resnet50 has, and the item of each push
    of two emulated iterations of policy "fusion"."""
    from dlsys.comm import SIGNAL
    from dlsys.experiments import schedule as ex

    job = ex.make_job("fusion", "resnet50", 1, servers=1)
    record = ex.simulate_schedule("fusion", "resnet50", 1, "10Gbps", servers=1, iterations=2)
    pushes = [
        m.label for m in record["result"].trace.messages if m.src == job.rank_of("sender", 0) and m.phase != SIGNAL
    ]
    return {
        "buckets": len(job.policy.items(list(job.layers))),
        "order": [int(label.rpartition("[item ")[2].rstrip("]")) for label in pushes],
    }  # "push bucket 0: ... [item 0]"


def as_tuples(items):
    return [(index, layers, lo, hi, tuple(priority)) for index, layers, lo, hi, priority, _ in items]


def test_four_layers_by_hand(student):
    # 1, 2, 3 and 4 MB (10^6 B), buckets of 5 MiB (5.24 MB) filled from the last layer: [4 MB], [3 + 2 MB], [1 MB]
    got = as_tuples(student.run(observe_buckets, cases=[(chain(250_000, 500_000, 750_000, 1_000_000), 5)])[0])
    want = [(0, [3], 1_500_000, 2_500_000, (0,)), (1, [1, 2], 250_000, 1_500_000, (1,)), (2, [0], 0, 250_000, (2,))]
    assert got == want, (
        f"buckets (index, layers, lo, hi, priority) {got}; want {want}: reverse order, a bucket closes when the next layer would not fit"
    )


def test_layers_without_parameters_are_in_no_bucket(student):
    got = as_tuples(student.run(observe_buckets, cases=[(chain(100, 0, 200, 0, 300), 0.001)])[0])  # 250 parameters
    want = [(0, [4], 300, 600, (0,)), (1, [2], 100, 300, (1,)), (2, [0], 0, 100, (2,))]
    assert got == want, f"buckets {got}; want {want}: a layer without parameters is in no bucket"


def test_the_last_layer_goes_first(student):
    models = {model: list(ex.layers(model, 32)) for model in PROFILES}
    for (model, layers), items in zip(
        models.items(), student.run(observe_buckets, cases=[(l, 25) for l in models.values()])
    ):
        assert max(i for i, l in enumerate(layers) if l.params) in items[0][1], (
            f"{model}: bucket 0 must hold the last layer"
        )
        assert [item[0] for item in items] == list(range(len(items))), f"{model}: buckets must be numbered 0, 1, ..."
        assert [item[4] for item in items] == [[k] for k in range(len(items))], f"{model}: bucket k has priority (k,)"
        firsts = [min(item[1]) for item in items]
        assert firsts == sorted(firsts, reverse=True), f"{model}: buckets must come in reverse parameter order"


def buckets_of_every_profile(student):
    models = {model: list(ex.layers(model, 32)) for model in PROFILES}
    answers = iter(student.run(observe_buckets, cases=[(l, cap) for l in models.values() for cap in CAPS_MIB]))
    return [(model, layers, cap_mb, next(answers)) for model, layers in models.items() for cap_mb in CAPS_MIB]


def test_buckets_tile_the_gradient(student):
    for model, layers, cap_mb, items in buckets_of_every_profile(student):
        for index, members, lo, hi, _, _ in items:
            mine = [layers[i] for i in members]
            want = (min(l.offset for l in mine), max(l.offset + l.params for l in mine))
            assert (lo, hi) == want, f"{model}, {cap_mb} MiB: bucket {index} spans {(lo, hi)}, its layers span {want}"
        spans = sorted((item[2], item[3]) for item in items)
        assert spans[0][0] == 0 and spans[-1][1] == sum(l.params for l in layers), (
            f"{model}, {cap_mb} MiB: the buckets must cover the whole gradient"
        )
        assert all(a[1] == b[0] for a, b in zip(spans, spans[1:])), f"{model}, {cap_mb} MiB: every element once"


def test_at_most_the_cap_and_full_when_closed(student):
    for model, layers, cap_mb, items in buckets_of_every_profile(student):
        for index, members, _, _, _, size in items:
            assert 4 * size <= cap_mb * 2**20 or len(members) == 1, (
                f"{model}, {cap_mb} MiB: bucket {index} holds {4 * size / 2**20:.3g} MiB, over the cap (only a larger layer may be)"
            )
        for item, following in zip(items, items[1:]):
            first = max(following[1])  # the next layer in reverse order
            assert 4 * (item[5] + layers[first].params) > cap_mb * 2**20, (
                f"{model}, {cap_mb} MiB: bucket {item[0]} closed while the next layer still fit"
            )


def test_an_emulated_run_sends_the_buckets_in_order(student):
    got = student.run(observe_pushes)
    assert got["order"] == list(range(got["buckets"])) * 2, (
        f"the pushes went in bucket order {got['order'][:8]}...; bucket 0 first, every iteration"
    )
