"""Graded: exercise goyal_schedule (dlsys/learn/optim.py: ``warmup_lr``, ``step_decay_lr``,
``goyal_schedule``), held to Goyal et al. 2017's recipe in closed form."""

import numpy as np
import pytest

from dlsys.learn.optim import goyal_schedule, step_decay_lr, warmup_lr

pytestmark = pytest.mark.ex_goyal_schedule


def test_warmup_closed_form():
    # from 0.1 to 3.2 over 5 steps: 0.1 + 3.1 * step / 5, then 3.2
    assert [warmup_lr(s, 5, 0.1, 3.2) for s in range(8)] == pytest.approx(
        [0.1, 0.72, 1.34, 1.96, 2.58, 3.2, 3.2, 3.2]), "step 0 is start_lr, step warmup_steps is target_lr"


def test_warmup_rises_by_equal_steps():
    rates = [warmup_lr(s, 40, 0.0, 2.0) for s in range(41)]
    assert np.diff(rates) == pytest.approx(np.full(40, 0.05)), "linear: the same increase every step"


def test_step_decay_alone():
    assert [step_decay_lr(s, 1.0, (3, 6), 0.1) for s in (0, 2, 3, 5, 6, 100)] == pytest.approx(
        [1.0, 1.0, 0.1, 0.1, 0.01, 0.01]), "divided by 10 at each milestone reached"
    assert step_decay_lr(50, 0.4, ()) == pytest.approx(0.4), "no milestones: constant"


def test_goyal_recipe_per_epoch():
    # ResNet-50 at batch 8k = 32 x 256: eta = 0.1, 5 warm-up epochs, / 10 at epochs 30, 60, 80
    lr = goyal_schedule(0.1, 32, 5, (30, 60, 80))
    epochs = [0, 1, 4, 5, 29, 30, 59, 60, 80, 89]
    expect = [0.1, 0.1 + 3.1 / 5, 0.1 + 4 * 3.1 / 5, 3.2, 3.2, 0.32, 0.32, 0.032, 0.0032, 0.0032]
    assert [lr(e) for e in epochs] == pytest.approx(expect), "warm-up over epochs 0..5, then step decay"


def test_schedule_depends_on_the_step_only():
    lr = goyal_schedule(0.05, 8, 10, (20,))
    forward = [lr(s) for s in range(30)]
    assert [lr(s) for s in reversed(range(30))] == forward[::-1], "no hidden state between calls"
