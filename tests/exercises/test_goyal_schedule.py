"""Graded: exercise goyal_schedule (dlsys/learn/optim.py: ``warmup_lr``, ``step_decay_lr``,
``goyal_schedule``), held to Goyal et al. 2017's recipe in closed form."""

import numpy as np
import pytest

pytestmark = pytest.mark.ex_goyal_schedule

MODULE = "dlsys.learn.optim"


def observe_goyal(args, steps):
    """Runs in the untrusted child: goyal_schedule(*args) at each of ``steps``, in that order."""
    from dlsys.learn.optim import goyal_schedule

    lr = goyal_schedule(*args)
    return [float(lr(s)) for s in steps]


def test_warmup_closed_form(student):
    # from 0.1 to 3.2 over 5 steps: 0.1 + 3.1 * step / 5, then 3.2
    got = student.calls(MODULE, [("warmup_lr", (s, 5, 0.1, 3.2)) for s in range(8)])
    want = [0.1, 0.72, 1.34, 1.96, 2.58, 3.2, 3.2, 3.2]
    assert got == pytest.approx(want), (
        f"warmup_lr at steps 0..7 gave {np.round(got, 4).tolist()}, want {want}: step 0 is start_lr, step warmup_steps is target_lr"
    )


def test_warmup_rises_by_equal_steps(student):
    rates = student.calls(MODULE, [("warmup_lr", (s, 40, 0.0, 2.0)) for s in range(41)])
    assert np.diff(rates) == pytest.approx(np.full(40, 0.05)), (
        "the rate must rise linearly: the same increase every step"
    )


def test_step_decay_alone(student):
    *got, constant = student.calls(
        MODULE,
        [("step_decay_lr", (s, 1.0, (3, 6), 0.1)) for s in (0, 2, 3, 5, 6, 100)] + [("step_decay_lr", (50, 0.4, ()))],
    )
    want = [1.0, 1.0, 0.1, 0.1, 0.01, 0.01]
    assert got == pytest.approx(want), (
        f"step_decay_lr at steps 0, 2, 3, 5, 6, 100 gave {got}; divided by 10 at each milestone: {want}"
    )
    assert constant == pytest.approx(0.4), f"no milestones gave {constant}, want the constant 0.4"


def test_goyal_recipe_per_epoch(student):
    # ResNet-50 at batch 8k = 32 x 256: eta = 0.1, 5 warm-up epochs, / 10 at epochs 30, 60, 80
    epochs = [0, 1, 4, 5, 29, 30, 59, 60, 80, 89]
    got = student.run(observe_goyal, args=(0.1, 32, 5, (30, 60, 80)), steps=epochs)
    expect = [0.1, 0.1 + 3.1 / 5, 0.1 + 4 * 3.1 / 5, 3.2, 3.2, 0.32, 0.32, 0.032, 0.0032, 0.0032]
    assert got == pytest.approx(expect), (
        f"at epochs {epochs} the rate was {np.round(got, 4).tolist()}, want {expect}: warm-up over epochs 0..5, then step decay"
    )


def test_schedule_depends_on_the_step_only(student):
    steps = list(range(30)) + list(reversed(range(30)))
    got = student.run(observe_goyal, args=(0.05, 8, 10, (20,)), steps=steps)
    assert got[30:] == got[:30][::-1], (
        "asked again in reverse order, the schedule gave other rates: it keeps hidden state"
    )
