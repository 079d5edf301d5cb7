"""Graded: exercise wfbp_iteration (dlsys/exercises/overlap.py: ``wfbp_iteration_s``), held
to iterations worked by hand and to the emulator (one worker, one server, policy "wfbp")
on real layer profiles over links without CPU overheads."""

import math

import pytest

from dlsys.experiments import schedule as ex
from dlsys.machine.net import LinkModel, get_node

pytestmark = pytest.mark.ex_wfbp_iteration

MB_PARAMS = 249_999  # with its 4-byte key a message of exactly 1e6 bytes


def wfbp(student, *args):
    """The student's wfbp_iteration_s(*args)."""
    return student.calls("dlsys.exercises.overlap", [("wfbp_iteration_s", args)])[0]


def test_one_layer_by_hand(student):
    # forward 1 ms, backward 2 ms; push 1 MB at 1 GB/s (1 ms) + 0.1 ms latency; update 0.5 ms; pull 1.1 ms
    got = wfbp(student, [1e-3], [MB_PARAMS], 1e-4, 1e9, [5e-4])
    want = 1e-3 + 2e-3 + 1.1e-3 + 5e-4 + 1.1e-3
    assert got == pytest.approx(want, rel=1e-12), (
        f"{got * 1e3:.6g} ms; forward, backward, push, update, pull: {want * 1e3:.6g} ms"
    )


def test_a_free_network_leaves_compute_alone(student):
    forward_s = [3e-3, 1e-3, 2e-3]
    got = wfbp(student, forward_s, [100, 0, 5_000], 0.0, math.inf, [0.0, 0.0, 0.0])
    assert got == pytest.approx(3 * sum(forward_s), rel=1e-12), (
        f"{got * 1e3:.6g} ms; with a free network, forward plus backward (twice the forward): {3 * sum(forward_s) * 1e3:.6g} ms"
    )


def test_communication_hides_behind_the_backward_of_the_layers_below(student):
    # the top layer is ready 2 ms into backward and back 2.7 ms later, while the bottom
    # layer's backward (no parameters) runs for 20 ms more: nothing is exposed
    got = wfbp(student, [10e-3, 1e-3], [0, MB_PARAMS], 1e-4, 1e9, [0.0, 5e-4])
    assert got == pytest.approx(3 * 11e-3, rel=1e-12), (
        f"{got * 1e3:.6g} ms, want 33 ms: WFBP sends a layer when its backward ends, not after backward"
    )


def test_a_push_waits_for_the_link(student):
    # both layers ready 2 ms into backward (the bottom one's backward is free): the top
    # layer's 40 bytes go first, the bottom layer's 2 MB (2 ms) only once they are out
    # (40 ns later), and the server's reply of 2 MB is back 2 ms after it arrived
    got = wfbp(student, [0.0, 1e-3], [2 * MB_PARAMS + 1, 9], 0.0, 1e9, [0.0, 0.0])
    want = 1e-3 + 2e-3 + 40e-9 + 2e-3 + 2e-3
    assert got == pytest.approx(want, rel=1e-12), (
        f"{got * 1e3:.9g} ms, want {want * 1e3:.9g} ms: a push departs when it is ready and the previous pushes "
        "are off the worker's link"
    )


@pytest.mark.parametrize("model, gbps", [("alexnet", 10), ("resnet50", 10), ("resnet50", 100), ("googlenet", 1)])
def test_equals_the_emulator(student, model, gbps):
    link, node = LinkModel(f"{gbps}Gbps, no overheads", 25e-6, gbps * 1e9 / 8), get_node("v100")
    layers = ex.layers(model, 32)
    mine = wfbp(
        student,
        [node.compute_s(l.flops) for l in layers],
        [l.params for l in layers],
        link.latency_s,
        link.bandwidth_Bps,
        [node.compute_s(4 * l.params) for l in layers],
    )
    emulator = ex.simulate_schedule("wfbp", model, 1, link, "v100", servers=1)["iteration_s"]
    assert mine == pytest.approx(emulator, rel=1e-9), (
        f"{model} at {gbps} Gbit/s: yours {mine}, the emulator's {emulator}"
    )
