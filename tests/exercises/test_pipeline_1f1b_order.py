"""Graded: exercise pipeline_1f1b_order (dlsys.train.pipeline.one_f_one_b: the 1F1B action
list of one stage, PipeDream-Flush; Narayanan et al. 2021, section 2.2, Figure 4 top).

Judged against properties and an independent oracle: a simulation, written here, of the
stages running their lists with each F waiting for the previous stage's F and each B for
the next stage's B (F costs 1, B 2, communication free), which must finish without a
deadlock in (m + p - 1) x 3 time units, 1F1B's and GPipe's bubble (p - 1) / (m + p - 1)."""

import pytest

pytestmark = pytest.mark.ex_pipeline_1f1b_order

SHAPES = [(2, 2), (2, 5), (3, 3), (4, 4), (4, 8), (5, 7)]  # (stages p, micro-batches m >= p)


def observe_orders(shapes):
    """Runs in the untrusted child: each stage's list for each (p, m), as [kind, micro-batch, chunk] lists."""
    from dlsys.train.pipeline import one_f_one_b

    return [[[list(a) for a in one_f_one_b(s, p, m)] for s in range(p)] for p, m in shapes]


def orders(student):
    lists = student.run(observe_orders, shapes=SHAPES)  # plain data: tuples arrive as lists
    return {shape: [[tuple(a) for a in actions] for actions in stages] for shape, stages in zip(SHAPES, lists)}


def in_flight(actions) -> int:
    held = peak = 0
    for kind, _, _ in actions:
        held += 1 if kind == "F" else -1
        peak = max(peak, held)
    return peak


def simulate(stage_lists, costs={"F": 1, "B": 2}) -> float | None:
    """The step's makespan, or None when no stage can start its next action (deadlock)."""
    p, end, free, pos = len(stage_lists), {}, [0.0] * len(stage_lists), [0] * len(stage_lists)
    while any(pos[s] < len(stage_lists[s]) for s in range(p)):
        moved = False
        for s in range(p):
            while pos[s] < len(stage_lists[s]):
                kind, i, _ = stage_lists[s][pos[s]]
                before = (
                    (("F", i, s - 1) if s > 0 else None)
                    if kind == "F"
                    else (("B", i, s + 1) if s < p - 1 else ("F", i, s))
                )
                if before is not None and before not in end:
                    break
                free[s] = end[kind, i, s] = max(free[s], end[before] if before else 0.0) + costs[kind]
                pos[s], moved = pos[s] + 1, True
        if not moved:
            return None
    return max(free)


def test_every_micro_batch_runs_its_forward_then_its_backward_once(student):
    for (p, m), stages in orders(student).items():
        for s, actions in enumerate(stages):
            want = sorted((k, i, 0) for k in "FB" for i in range(m))
            assert sorted(actions) == want, (
                f"stage {s} of p = {p}, m = {m} runs {actions}: each micro-batch 0..{m - 1} once forward (F) and once backward (B)"
            )
            for i in range(m):
                assert actions.index(("F", i, 0)) < actions.index(("B", i, 0)), (
                    f"stage {s} of p = {p}, m = {m} runs B {i} before F {i}: a backward needs its forward's activations"
                )


def test_the_warm_up_runs_p_minus_s_minus_1_forwards(student):
    for (p, m), stages in orders(student).items():
        for s, actions in enumerate(stages):
            first_b = next((n for n, a in enumerate(actions) if a[0] == "B"), len(actions))
            forwards = sum(a[0] == "F" for a in actions[:first_b])
            if forwards == m and m > p - s:
                pytest.fail(
                    f"stage {s} of p = {p}, m = {m} runs all {m} forwards before its first backward: that is "
                    "GPipe's order (it holds all m micro-batches); 1F1B starts backwards after the warm-up"
                )
            assert forwards == p - s, (
                f"stage {s} of p = {p}, m = {m} runs {forwards} forwards before its first backward; 1F1B's warm-up is "
                f"p - s - 1 = {p - s - 1} forwards, then the steady state's first forward, then B 0"
            )


def test_at_most_p_minus_s_micro_batches_are_in_flight(student):
    for (p, m), stages in orders(student).items():
        for s, actions in enumerate(stages):
            assert in_flight(actions) == p - s, (
                f"stage {s} of p = {p}, m = {m} holds up to {in_flight(actions)} micro-batches' activations at once "
                f"(forward done, backward not yet); 1F1B holds at most p - s = {p - s}"
            )


def test_after_the_warm_up_forward_and_backward_alternate_then_the_cooldown_runs_the_rest(student):
    for (p, m), stages in orders(student).items():
        for s, actions in enumerate(stages):
            w = p - s - 1
            want = [("F", i, 0) for i in range(w)]
            for i in range(m - w):
                want += [("F", w + i, 0), ("B", i, 0)]
            want += [("B", i, 0) for i in range(m - w, m)]
            assert actions == want, (
                f"stage {s} of p = {p}, m = {m} runs {' '.join(k + str(i) for k, i, _ in actions)}; 1F1B runs "
                f"{' '.join(k + str(i) for k, i, _ in want)}: warm-up, then F and B in turn (each B the oldest "
                "micro-batch in flight), then the cooldown's remaining backwards in micro-batch order"
            )


def test_the_stages_finish_without_deadlock_with_the_1f1b_bubble(student):
    for (p, m), stages in orders(student).items():
        makespan = simulate(stages)
        assert makespan is not None, (
            f"p = {p}, m = {m}: the stages' lists deadlock (each stage waits for an action another stage runs later)"
        )
        bubble = (makespan - 3 * m) / makespan
        assert makespan == 3 * (m + p - 1), (
            f"p = {p}, m = {m}: the step takes {makespan:g} units (F = 1, B = 2), idle {bubble:.3f} of it; 1F1B takes "
            f"3 (m + p - 1) = {3 * (m + p - 1)}, a bubble of (p - 1) / (m + p - 1) = {(p - 1) / (m + p - 1):.3f}"
        )
