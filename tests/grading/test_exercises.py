"""Proof that grading grades: stubs score 0, the reference scores full, plausible wrong
solutions get partial credit, and a hung, deadlocked or greedy submission costs only the
tests it breaks. The graded tests themselves are in tests/exercises/."""

import argparse
import ast
import json
import subprocess
import sys
from pathlib import Path

import pytest

from dlsys.cli.exercises import add_commands
from dlsys.exercises import EXERCISES, REPO_ROOT, get
from dlsys.grading.grader import grade, gradescope_results, score_table
from dlsys.grading.release import find_regions, release, replace_regions, student_source
from dlsys.grading.testing import use_student_files

# A ring all-reduce that forwards whole buffers: right values, p/2 times the bytes, (p-1)(alpha + n beta).
WHOLE_BUFFERS = """\
    acc, passing = x, x
    for step in range(comm.size - 1):
        send(comm, passing, (comm.rank + 1) % comm.size, "allreduce", step)
        passing = recv_like(comm, (comm.rank - 1) % comm.size, x)
        acc = combine(comm, acc, passing, op)
    return acc
"""

# A ring reduce-scatter with the all-gather's chunk indices: one block off.
OFF_BY_ONE = """\
    p, r = comm.size, comm.rank
    for step in range(p - 1):
        send_i, recv_i = (r - step) % p, (r - step - 1) % p
        send(comm, blocks[send_i], (r + 1) % p, "reduce-scatter", step, send_i)
        incoming = recv_like(comm, (r - 1) % p, blocks[recv_i])
        blocks[recv_i] = combine(comm, blocks[recv_i], incoming, op)
    return blocks[r]
"""

# The token ring's right body, after a submission's misbehaviour
RIGHT_TOKEN_RING = """\
    if comm.rank == 0:
        comm.send(token + 1, right)
        return comm.recv(source=left)
    received = comm.recv(source=left)
    comm.send(received + 1, right)
    return received
"""

# A token ring that loops forever on 4 ranks, allocates 2 GiB on 3 and deadlocks on 6; it
# always warns (divide by zero), which must not fail the tests it passes.
MISBEHAVING_TOKEN_RING = (
    """\
    right, left = (comm.rank + 1) % comm.size, (comm.rank - 1) % comm.size
    np.float64(1.0) / 0.0
    if comm.size == 4:
        while True:
            pass
    if comm.size == 3:
        np.ones(1 << 28)
    if comm.size == 6:
        comm.recv(source=left)
"""
    + RIGHT_TOKEN_RING
)


def submission(tmp_path, bodies: dict, exercises=EXERCISES):
    """A student directory holding the reference files of ``exercises``, with the regions of
    the exercises in ``bodies`` replaced by those bodies."""
    for e in exercises:
        for file, name in zip(e.files, e.student_files):
            source = (REPO_ROOT / file).read_text()
            (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
            (tmp_path / name).write_text(replace_regions(source, lambda r: bodies.get(r.exercise, r.body)))
    return tmp_path


def by_exercise(results):
    return {e: [r for r in results if r.exercise == e] for e in dict.fromkeys(r.exercise for r in results)}


def test_every_exercise_has_regions_and_tests():
    for e in EXERCISES:
        for file in e.files:
            assert e.id in {r.exercise for r in find_regions((REPO_ROOT / file).read_text(), file)}
        assert (REPO_ROOT / e.tests).is_file() and (REPO_ROOT / e.lesson).is_file()


@pytest.mark.parametrize(
    "source, error",
    [
        ("# BEGIN SOLUTION token_ring\nx = 1\n", "never closed"),
        ("# END SOLUTION\n", "without BEGIN"),
        ("# BEGIN SOLUTION token_ring\n# BEGIN SOLUTION token_ring\n", "inside the region"),
        ("# BEGIN SOLUTION no_such_exercise\n# END SOLUTION\n", "known exercise id"),
    ],
)
def test_malformed_regions_are_rejected_with_the_line(source, error):
    with pytest.raises(ValueError, match=error):
        find_regions(source, "f.py")


def test_release_stubs_every_region_and_ships_the_tests(tmp_path):
    written = release(tmp_path)
    for e in EXERCISES:
        for file, name in zip(e.files, e.student_files):
            reference = (REPO_ROOT / file).read_text()
            released = (tmp_path / name).read_text()
            assert released == student_source(reference) and "SOLUTION" not in released
            assert released.count(f'raise NotImplementedError("{e.id}: see {e.lesson}")') == sum(
                r.exercise == e.id for r in find_regions(reference)
            )
            compile(released, name, "exec")
        assert (tmp_path / "tests" / f"test_{e.id}.py").is_file()
    assert {p.name for p in written} >= {"README.md", "exercises.json", "conftest.py"}
    with pytest.raises(FileExistsError):
        release(tmp_path)  # never overwrites a student's work


def test_released_files_keep_their_package_paths_and_unique_names(tmp_path):
    """A relative import in a released file names the file it opens: each file sits at its
    path inside the package, and a target it imports is there too or in dlsys itself. The
    names are unique as well, so a submission that lost its folders still grades."""
    release(tmp_path)
    names = [n for e in EXERCISES for n in dict.fromkeys(e.student_files)]
    unique = set(dict.fromkeys(names))
    assert len({Path(n).name for n in unique}) == len(unique), sorted(names)
    for name in unique:
        package = ("dlsys/" + name).rsplit("/", 1)[0].split("/")
        for node in ast.walk(ast.parse((tmp_path / name).read_text())):
            if isinstance(node, ast.ImportFrom) and node.level:
                base = package[: len(package) - node.level + 1]
                for target in (
                    ([*base, *node.module.split(".")],) if node.module else [[*base, a.name] for a in node.names]
                ):
                    path = "/".join(target)
                    here = [tmp_path / Path(path).relative_to("dlsys").with_suffix(".py")]
                    there = [REPO_ROOT / f"{path}.py", REPO_ROOT / path / "__init__.py"]
                    if not node.module and not any(p.is_file() for p in here + there):
                        continue  # ``from . import name``: a name of the package, not a module
                    assert any(p.is_file() for p in here + there), f"{name}:{node.lineno} imports {path}"
    modules = sorted({m for e in EXERCISES for m in e.modules})
    code = (
        f"from dlsys.grading.testing import use_student_files\nuse_student_files({str(tmp_path)!r})\n"
        f"import importlib\nfor m in {modules!r}:\n    assert importlib.import_module(m).__file__.startswith("
        f"{str(tmp_path)!r}), m"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr


def test_stubs_score_zero_with_every_test_failing(tmp_path):
    release(tmp_path)
    results = grade(tmp_path)
    assert len(results) >= 3 * len(EXERCISES)
    assert not any(r.passed for r in results) and sum(r.score for r in results) == 0
    assert all("NotImplementedError" in r.output for r in results), "stubs must fail by raising, not otherwise"


def test_the_reference_scores_full_and_reports_gradescope_json():
    results = grade()
    assert all(r.passed for r in results), [r.output for r in results if not r.passed]
    report = gradescope_results(results)
    assert report["score"] == report["max_score"] == sum(e.points for e in EXERCISES)
    assert {"name", "score", "max_score", "output"} <= set(report["tests"][0])
    assert "total" in score_table(results)


def test_a_ring_forwarding_whole_buffers_gets_partial_credit(tmp_path):
    results = grade(submission(tmp_path, {"ring_allreduce": WHOLE_BUFFERS}), ["ring_allreduce"])
    failed = {r.name.split("::")[1] for r in results if not r.passed}
    assert failed == {
        "test_each_rank_sends_2_p_minus_1_blocks_to_its_right_neighbour",
        "test_time_is_the_ring_closed_form",
    }
    assert 0 < sum(r.score for r in results) < get("ring_allreduce").points


def test_an_off_by_one_chunk_index_gets_partial_credit(tmp_path):
    results = grade(submission(tmp_path, {"ring_reduce_scatter": OFF_BY_ONE}), ["ring_reduce_scatter"])
    passed = {r.name.split("::")[1] for r in results if r.passed}
    assert passed == {"test_p_minus_1_blocks_to_the_right_neighbour", "test_time_is_the_ring_closed_form"}
    assert 0 < sum(r.score for r in results) < get("ring_reduce_scatter").points


# Two plausible wrong datapath.py solutions (its two regions differ, so edit the reference):
# a copied send counted as a write only (k = 7), and a bound that forgets the p ranks share
# one memory (4 s / k instead of 4 s / (k p)).
DATAPATH_MISTAKES = {
    "copy_not_read": (
        "per_step_pair = 5 if lent else 9",
        "per_step_pair = 5 if lent else 7",
        {
            "test_linear_in_the_buffer_and_nothing_on_one_rank",
            "test_bound_follows_from_the_traffic",
            "test_valid_input_accepted_bad_input_rejected_by_name",
        },
    ),
    "memory_not_shared": (
        "allreduce_s = p * ring_allreduce_traffic_bytes",
        "allreduce_s = ring_allreduce_traffic_bytes",
        {
            "test_two_and_four_ranks_by_hand",
            "test_matches_the_count_step_by_step",
            "test_linear_in_the_buffer_and_nothing_on_one_rank",
            "test_lending_saves_a_read_and_a_write_of_every_byte_sent",
            "test_tends_to_5n_lent_and_9n_copied_for_many_ranks",
            "test_valid_input_accepted_bad_input_rejected_by_name",
        },
    ),
}


@pytest.mark.parametrize("mistake", DATAPATH_MISTAKES)
def test_a_wrong_memory_traffic_count_or_bound_gets_partial_credit(tmp_path, mistake):
    grade_one_edit(tmp_path, "ring_memory_traffic", *DATAPATH_MISTAKES[mistake])


def grade_one_edit(tmp_path, exercise: str, reference: str, wrong: str, expected_passed: set) -> None:
    """The reference solution with one edit in the exercise's file: exactly the expected
    tests pass, for part of the points."""
    source = (REPO_ROOT / get(exercise).file).read_text()
    assert source.count(reference) == 1
    (tmp_path / get(exercise).student_file).parent.mkdir(parents=True)
    (tmp_path / get(exercise).student_file).write_text(source.replace(reference, wrong))
    results = grade(tmp_path, [exercise])
    assert {r.name.split("::")[1] for r in results if r.passed} == expected_passed
    assert 0 < sum(r.score for r in results) < get(exercise).points


# Plausible wrong compression solutions, as edits of the reference files (their regions span
# compress and decompress, or two files): (file, reference line, wrong line) each, and the tests
# that still pass. TernGrad: round to nearest (biased: variance 0, mean off by up to s / 2); one
# byte per 2-bit code (dense-sized payload). Top-k: the residual never added back; int64
# indices (numpy's default); the k largest signed values instead of magnitudes.
COMPRESSION_MISTAKES = {
    "round_to_nearest": (
        "terngrad_quantizer",
        [
            (
                "dlsys/compress/terngrad.py",
                "keep = self.rng.random(flat.size) < np.abs(flat) / s",
                "keep = np.abs(flat) / s >= 0.5",
            )
        ],
        {
            "test_decodes_to_minus_s_zero_or_s_with_the_sign_of_g",
            "test_payload_is_2_bit_codes_and_one_float32_scaler[float32]",
            "test_payload_is_2_bit_codes_and_one_float32_scaler[float64]",
            "test_round_trip_keeps_shape_and_dtype",
        },
    ),
    "one_byte_per_code": (
        "terngrad_quantizer",
        [
            ("dlsys/compress/terngrad.py", "return (pack_bits(codes, 2),", "return (codes,"),
            (
                "dlsys/compress/terngrad.py",
                "codes = unpack_bits(packed, 2, int(np.prod(shape))).astype(np.int8) - 1",
                "codes = packed.astype(np.int8) - 1",
            ),
        ],
        {
            "test_decodes_to_minus_s_zero_or_s_with_the_sign_of_g",
            "test_unbiased_the_mean_of_many_draws_is_g",
            "test_variance_is_abs_g_times_s_minus_abs_g",
            "test_a_shared_scale_larger_or_smaller_than_max_abs_g",
            "test_round_trip_keeps_shape_and_dtype",
        },
    ),
    "residual_forgotten": (
        "topk_error_feedback",
        [
            (
                "dlsys/compress/compressor.py",
                "return tensor + self.residuals[name] if name in self.residuals else tensor",
                "return tensor",
            )
        ],
        {
            "test_keeps_exactly_the_k_largest_magnitudes[1]",
            "test_keeps_exactly_the_k_largest_magnitudes[10]",
            "test_keeps_exactly_the_k_largest_magnitudes[999]",
            "test_payload_is_int32_indices_and_values_in_the_gradients_dtype[float16]",
            "test_payload_is_int32_indices_and_values_in_the_gradients_dtype[float32]",
            "test_payload_is_int32_indices_and_values_in_the_gradients_dtype[float64]",
            "test_decodes_to_the_kept_entries_and_zeros_elsewhere",
        },
    ),
    "int64_indices": (
        "topk_error_feedback",
        [("dlsys/compress/topk.py", "[flat.size - k :].astype(np.int32)", "[flat.size - k :]")],
        {
            "test_keeps_exactly_the_k_largest_magnitudes[1]",
            "test_keeps_exactly_the_k_largest_magnitudes[10]",
            "test_keeps_exactly_the_k_largest_magnitudes[999]",
            "test_decodes_to_the_kept_entries_and_zeros_elsewhere",
            "test_error_feedback_loses_nothing",
            "test_the_residual_drains_once_the_gradients_stop",
            "test_first_step_compensates_nothing_and_each_name_has_its_own_residual",
        },
    ),
    "largest_signed_values": (
        "topk_error_feedback",
        [
            (
                "dlsys/compress/topk.py",
                "np.argpartition(np.abs(flat), flat.size - k)",
                "np.argpartition(flat, flat.size - k)",
            )
        ],
        {
            "test_keeps_exactly_the_k_largest_magnitudes[1]",
            "test_payload_is_int32_indices_and_values_in_the_gradients_dtype[float16]",
            "test_payload_is_int32_indices_and_values_in_the_gradients_dtype[float32]",
            "test_payload_is_int32_indices_and_values_in_the_gradients_dtype[float64]",
            "test_error_feedback_loses_nothing",
            "test_first_step_compensates_nothing_and_each_name_has_its_own_residual",
        },
    ),
}


# Graded together, one mistake per exercise, to grade three submissions instead of five.
COMPRESSION_SUBMISSIONS = [
    ("round_to_nearest", "residual_forgotten"),
    ("one_byte_per_code", "int64_indices"),
    ("largest_signed_values",),
]


@pytest.mark.parametrize("mistakes", COMPRESSION_SUBMISSIONS, ids="+".join)
def test_a_biased_forgetful_or_dense_compressor_gets_partial_credit(tmp_path, mistakes):
    # dlsys.compress imports every method, so both exercises' files must be there
    exercises = [get("terngrad_quantizer"), get("topk_error_feedback")]
    student = submission(tmp_path, {}, exercises)
    for mistake in mistakes:
        for file, reference, wrong in COMPRESSION_MISTAKES[mistake][1]:
            target = tmp_path / Path(file).relative_to("dlsys")
            source = target.read_text()
            assert source.count(reference) == 1, reference
            target.write_text(source.replace(reference, wrong))
    results = by_exercise(grade(student, [COMPRESSION_MISTAKES[m][0] for m in mistakes]))
    for mistake in mistakes:
        exercise, _, expected_passed = COMPRESSION_MISTAKES[mistake]
        assert {r.name.split("::")[1] for r in results[exercise] if r.passed} == expected_passed, mistake
        assert 0 < sum(r.score for r in results[exercise]) < get(exercise).points, mistake


def test_a_hung_deadlocked_or_greedy_submission_costs_only_those_tests(tmp_path):
    """The ring_cost.py exercise is missing from this submission: its tests fail without running."""
    student = submission(tmp_path, {"token_ring": MISBEHAVING_TOKEN_RING}, [get("token_ring")])
    results = by_exercise(grade(student, ["token_ring", "ring_allreduce_cost"], timeout_s=3, memory_bytes=1 << 30))
    outputs = {r.name.split("::")[1]: r.output for r in results["token_ring"] if not r.passed}
    assert set(outputs) == {
        "test_one_lap_costs_p_messages_one_after_the_other",
        "test_keeps_dtype_and_shape",
        "test_the_token_goes_once_around_neighbour_to_neighbour",
    }
    assert "timed out after 3 s" in outputs["test_one_lap_costs_p_messages_one_after_the_other"]
    assert "MemoryError" in outputs["test_keeps_dtype_and_shape"]
    assert "deadlock" in outputs["test_the_token_goes_once_around_neighbour_to_neighbour"]
    reasons = {r.name.split("::")[1]: r.reason for r in results["token_ring"] if not r.passed}
    assert reasons["test_one_lap_costs_p_messages_one_after_the_other"] == (
        "timed out after 3 s (an infinite loop or a deadlock?)"
    )
    assert "MemoryError" in reasons["test_keeps_dtype_and_shape"]
    assert reasons["test_the_token_goes_once_around_neighbour_to_neighbour"].startswith(
        "DeadlockError: deadlock: no rank can make progress: rank 0 waits for rank 5"
    )
    assert len(results["token_ring"]) - len(outputs) == 2, "the tests it passes despite a warning pass"
    assert all("RuntimeWarning" in output for output in outputs.values()), "what the student's code printed is shown"
    assert all(not r.passed and "no exercises/ring_cost.py" in r.output for r in results["ring_allreduce_cost"])


def test_student_files_must_come_first():
    import dlsys.collectives  # noqa: F401 - imports ring.py and trees.py: too late to swap in a student's

    with pytest.raises(RuntimeError, match="too late"):
        use_student_files(REPO_ROOT)


def test_cli_lists_releases_and_grades(tmp_path, capsys):
    parser = argparse.ArgumentParser(prog="dlsys")
    add_commands(parser.add_subparsers(dest="command", required=True))

    def run(*argv):
        args = parser.parse_args(argv)
        return args.func(args)

    assert run("exercises", "list") == 0
    listing = capsys.readouterr().out
    assert all(e.id in listing and e.lesson in listing for e in EXERCISES)
    assert run("exercises", "release", str(tmp_path / "hw")) == 0
    assert run("exercises", "release", str(tmp_path / "hw")) == 2
    capsys.readouterr()
    assert run("grade", str(tmp_path / "hw"), "--exercise", "token_ring", "--json", str(tmp_path / "r.json")) == 1
    report = json.loads((tmp_path / "r.json").read_text())
    assert report["score"] == 0 and report["max_score"] == get("token_ring").points and len(report["tests"]) == 5
    # by default: why each test failed, one line each, then the table; nothing of pytest's reports
    lines = capsys.readouterr().out.splitlines()
    why = [line for line in lines if line.startswith("  test_")]
    assert len(why) == 5 and all(
        line.endswith(
            ": rank 0: NotImplementedError: token_ring: see lessons/01_why_distribute.py "
            "(at exercises/token_ring.py:22)"
        )
        for line in why
    )
    assert [line.split() for line in lines[-3:-1]] == [
        ["token_ring", "0/5", "0.00/10.00"],
        ["total", "0/5", "0.00/10.00"],
    ]
    assert len(lines) == 2 + 5 + 1 + 3 + 1  # headings, the failures, a blank line, the table, the json line
    # --verbose: pytest's full report of each, and no warning about the sandbox's own plugins
    assert run("grade", str(tmp_path / "hw"), "--exercise", "token_ring", "--verbose") == 1
    out = capsys.readouterr().out
    assert out.count("--- FAILED tests/exercises/test_token_ring.py::") == 5 and out.count("= FAILURES =") == 5
    assert "Traceback" in out and "Warning" not in out


# Plausible wrong optim.py solutions (edits of the reference): LARS without the guard for
# zero norms, LARS without the weight-decay term, a warm-up off by one (it counts from
# step 1, so it reaches the target a step, in Goyal's per-epoch schedule an epoch, early).
OPTIM_MISTAKES = {
    "no_zero_norm_guard": (
        "lars_local_lr",
        "    safe = (w_norm > 0) & (update_norm > 0)\n"
        "    return np.where(safe, eta * w_norm / np.where(safe, update_norm, 1.0), 1.0)",
        "    return eta * w_norm / update_norm",
        {
            "test_two_layers_by_hand",
            "test_the_weight_decay_term",
            "test_trust_ratio_scales_with_eta",
            "test_steps_match_an_independent_numpy_lars",
        },
    ),
    "no_weight_decay_term": (
        "lars_local_lr",
        "g_norm + self.weight_decay * w_norm, self.eta",
        "g_norm, self.eta",
        {"test_two_layers_by_hand", "test_zero_norm_layers_get_ratio_one", "test_trust_ratio_scales_with_eta"},
    ),
    "warmup_off_by_one": (
        "goyal_schedule",
        "(target_lr - start_lr) * step / warmup_steps",
        "(target_lr - start_lr) * (step + 1) / warmup_steps",
        {"test_step_decay_alone", "test_schedule_depends_on_the_step_only"},
    ),
}


@pytest.mark.parametrize("mistake", OPTIM_MISTAKES)
def test_lars_and_warmup_mistakes_get_partial_credit(tmp_path, mistake):
    grade_one_edit(tmp_path, *OPTIM_MISTAKES[mistake])


# Plausible wrong scheduling solutions (edits of the reference files): WFBP timed as FIFO
# (every push waits for the end of backward), WFBP without the pull (the iteration ends
# when the server has updated), DDP's buckets filled in forward order, and buckets closed
# only once they are over the cap. Each: (exercise, [(reference, wrong)], tests still passing).
SCHEDULE_MISTAKES = {
    "pushed_after_backward": (
        "wfbp_iteration",
        [("depart = max(ready[l], worker_link)", "depart = max(backward_end_s, worker_link)")],
        {"test_one_layer_by_hand", "test_a_free_network_leaves_compute_alone", "test_a_push_waits_for_the_link"},
    ),
    "pull_forgotten": (
        "wfbp_iteration",
        [("last_back = max(last_back, reply + wire_s + latency_s)", "last_back = max(last_back, server_clock)")],
        {
            "test_a_free_network_leaves_compute_alone",
            "test_communication_hides_behind_the_backward_of_the_layers_below",
        },
    ),
    "forward_order_buckets": (
        "ddp_buckets",
        [
            ("for i in reversed(range(len(layers))):", "for i in range(len(layers)):"),
            (
                "layers[b[-1]].offset, layers[b[0]].offset + layers[b[0]].params",
                "layers[b[0]].offset, layers[b[-1]].offset + layers[b[-1]].params",
            ),
        ],
        {"test_buckets_tile_the_gradient"},
    ),
    "buckets_over_the_cap": (
        "ddp_buckets",
        [("if current and nbytes + size > self.bucket_mb * 2**20:", "if current and nbytes > self.bucket_mb * 2**20:")],
        {
            "test_buckets_tile_the_gradient",
            "test_the_last_layer_goes_first",
            "test_an_emulated_run_sends_the_buckets_in_order",
        },
    ),
}


@pytest.mark.parametrize(
    "mistakes",
    [("pushed_after_backward", "forward_order_buckets"), ("pull_forgotten", "buckets_over_the_cap")],
    ids="+".join,
)
def test_wfbp_and_bucket_mistakes_get_partial_credit(tmp_path, mistakes):
    # the graded tests run the emulator, which imports dlsys whole: every exercise file is there
    student = submission(tmp_path, {})
    for mistake in mistakes:
        exercise, edits, _ = SCHEDULE_MISTAKES[mistake]
        target = tmp_path / get(exercise).student_file
        source = target.read_text()
        for reference, wrong in edits:
            assert source.count(reference) == 1, reference
            source = source.replace(reference, wrong)
        target.write_text(source)
    results = by_exercise(grade(student, [SCHEDULE_MISTAKES[m][0] for m in mistakes]))
    for mistake in mistakes:
        exercise, _, expected_passed = SCHEDULE_MISTAKES[mistake]
        assert {r.name.split("::")[1] for r in results[exercise] if r.passed} == expected_passed, mistake
        assert 0 < sum(r.score for r in results[exercise]) < get(exercise).points, mistake


# Plausible wrong alpha_beta_fit solutions (edits of dlsys/machine/netstack.py): a plain least-squares
# fit (the 64 MiB messages decide alpha too) and a ring that counts p steps instead of p - 1.
NETSTACK_MISTAKES = {
    "unweighted_fit": (
        "    A = np.stack([np.ones_like(n), n], axis=1) / t[:, None]\n"
        "    (alpha, beta), *_ = np.linalg.lstsq(A, np.ones_like(t), rcond=None)",
        "    A = np.stack([np.ones_like(n), n], axis=1)\n    (alpha, beta), *_ = np.linalg.lstsq(A, t, rcond=None)",
        {
            "test_exact_timings_give_back_alpha_and_beta",
            "test_prediction_is_the_emulated_ring",
            "test_one_rank_costs_nothing",
        },
    ),
    "p_steps": (
        "    return 2 * (p - 1) * (alpha_s + nbytes / p * beta_s_per_byte)",
        "    return 2 * p * (alpha_s + nbytes / p * beta_s_per_byte)",
        {
            "test_exact_timings_give_back_alpha_and_beta",
            "test_noisy_timings_within_a_few_percent",
            "test_small_messages_decide_alpha_even_beside_huge_ones",
        },
    ),
}


@pytest.mark.parametrize("mistake", NETSTACK_MISTAKES)
def test_alpha_beta_mistakes_get_partial_credit(tmp_path, mistake):
    grade_one_edit(tmp_path, "alpha_beta_fit", *NETSTACK_MISTAKES[mistake])


# Plausible wrong contention_step solutions (edits of dlsys/exercises/contention.py): each
# link's capacity split evenly among the flows on it, the least share on a flow's route
# (what a flow held back elsewhere leaves goes to nobody), and the latency forgotten.
CONTENTION_MISTAKES = {
    "static_share": (
        """    rates = [0.0] * len(routes)
    left = [float(c) for c in capacities_Bps]  # capacity not yet given to a fixed flow
    unfixed = set(range(len(routes)))
    while unfixed:
        count = [0] * len(left)
        for i in unfixed:
            for link in routes[i]:
                count[link] += 1
        level, full = min((left[link] / count[link], link) for link in range(len(left)) if count[link])
        for i in [i for i in unfixed if full in routes[i]]:
            rates[i] = level
            unfixed.discard(i)
            for link in routes[i]:
                left[link] -= level
    return rates
""",
        """    flows_on = [sum(link in route for route in routes) for link in range(len(capacities_Bps))]
    return [min(capacities_Bps[link] / flows_on[link] for link in route) for route in routes]
""",
        {
            "test_two_flows_on_one_link_by_hand",
            "test_an_incast_ends_at_latency_plus_all_bytes_over_the_ingress",
            "test_empty_and_zero_byte_flows_pay_only_the_latency",
            "test_valid_input_accepted_bad_input_rejected_by_name",
            "test_equals_the_emulator_flow_for_flow[incast of unequal pushes on a flat switch]",
            "test_equals_the_emulator_flow_for_flow[a ring step across an oversubscribed tree]",
        },
    ),
    "latency_forgotten": (
        "    t = latency_s  # every flow",
        "    t = 0.0  # every flow",
        {
            "test_a_flow_held_back_elsewhere_leaves_its_share_to_the_others",
            "test_valid_input_accepted_bad_input_rejected_by_name",
        },
    ),
}


@pytest.mark.parametrize("mistake", CONTENTION_MISTAKES)
def test_contention_static_share_or_forgotten_latency_gets_partial_credit(tmp_path, mistake):
    grade_one_edit(tmp_path, "contention_step", *CONTENTION_MISTAKES[mistake])


# Plausible wrong ZeRO-2 steps (edits of dlsys/train/zero.py): the updated shards never
# all-gathered (every rank's next forward runs on the other ranks' old weights), and the
# gradient divided by P twice (reduce-scatter's mean, then / P again).
ZERO_MISTAKES = {
    "stale_params": (
        "        if self.stage < 3:\n            for k in range(len(self.units)):\n"
        "                self._allgather(k)\n",
        "",
        {
            "test_each_rank_keeps_its_shard_of_the_mean_gradient[2]",
            "test_each_rank_keeps_its_shard_of_the_mean_gradient[4]",
            "test_the_update_moves_the_own_shard_by_sgd_on_it[2]",
            "test_the_update_moves_the_own_shard_by_sgd_on_it[4]",
        },
    ),
    "divided_twice": (
        'op="mean")[: mine.stop - mine.start]',
        'op="mean")[: mine.stop - mine.start] / self.comm.size',
        {
            "test_the_update_moves_the_own_shard_by_sgd_on_it[2]",
            "test_the_update_moves_the_own_shard_by_sgd_on_it[4]",
            "test_after_a_step_every_rank_holds_every_ranks_updated_shard[2]",
            "test_after_a_step_every_rank_holds_every_ranks_updated_shard[4]",
            "test_each_rank_sends_2_p_minus_1_over_p_of_the_model_per_step[2]",
            "test_each_rank_sends_2_p_minus_1_over_p_of_the_model_per_step[4]",
        },
    ),
}


@pytest.mark.parametrize("mistake", ZERO_MISTAKES)
def test_a_zero2_step_with_stale_params_or_a_gradient_scaled_twice_gets_partial_credit(tmp_path, mistake):
    grade_one_edit(tmp_path, "zero2_step", *ZERO_MISTAKES[mistake])


# Plausible wrong tensor-parallel MLPs (edits of dlsys/train/tensor_parallel_layers.py): no g
# all-reduce after the row-parallel layer (each rank keeps its partial product), and an
# all-reduce in forward where f is the identity (t copies of X summed).
TP_MISTAKES = {
    "g_missing": (
        "        return allreduce(self.group, y)\n",
        "        return y\n",
        {
            f"{name}[{t}]"
            for t in (2, 4)
            for name in (
                "test_column_parallel_forward_gives_each_rank_its_columns_without_communication",
                "test_column_parallel_backward_sums_the_input_gradient_over_the_ranks",
                "test_row_parallel_backward_needs_no_communication",
            )
        },
    ),
    "f_allreduce_forward": (
        "        # BEGIN SOLUTION tensor_parallel_mlp\n        return x\n",
        "        # BEGIN SOLUTION tensor_parallel_mlp\n        return allreduce(self.group, x)\n",
        {
            f"{name}[{t}]"
            for t in (2, 4)
            for name in (
                "test_row_parallel_forward_all_reduces_the_partial_products_and_adds_b_once",
                "test_row_parallel_backward_needs_no_communication",
            )
        },
    ),
}


@pytest.mark.parametrize("mistake", TP_MISTAKES)
def test_a_tensor_parallel_mlp_without_g_or_with_an_f_all_reduce_gets_partial_credit(tmp_path, mistake):
    grade_one_edit(tmp_path, "tensor_parallel_mlp", *TP_MISTAKES[mistake])


# Plausible wrong 1F1B orders (edits of dlsys/train/pipeline.py): GPipe's order (every
# forward first) and a warm-up one forward too long keep the bubble on a free link but hold
# more micro-batches; the cooldown's backwards last micro-batch first stall the pipe.
PIPELINE_ORDER_AND_BUBBLE = {
    "test_every_micro_batch_runs_its_forward_then_its_backward_once",
    "test_the_stages_finish_without_deadlock_with_the_1f1b_bubble",
}
PIPELINE_MISTAKES = {
    "gpipe_order": ("    warmup = stages - stage - 1\n", "    warmup = micro_batches\n", PIPELINE_ORDER_AND_BUBBLE),
    "warmup_off_by_one": (
        "    warmup = stages - stage - 1\n",
        "    warmup = stages - stage\n",
        PIPELINE_ORDER_AND_BUBBLE,
    ),
    "cooldown_reversed": (
        '    actions += [Action("B", i) for i in range(micro_batches - warmup, micro_batches)]\n',
        '    actions += [Action("B", i) for i in reversed(range(micro_batches - warmup, micro_batches))]\n',
        {
            "test_every_micro_batch_runs_its_forward_then_its_backward_once",
            "test_the_warm_up_runs_p_minus_s_minus_1_forwards",
            "test_at_most_p_minus_s_micro_batches_are_in_flight",
        },
    ),
}


@pytest.mark.parametrize("mistake", PIPELINE_MISTAKES)
def test_a_1f1b_order_as_gpipe_or_with_a_wrong_warm_up_or_cooldown_gets_partial_credit(tmp_path, mistake):
    grade_one_edit(tmp_path, "pipeline_1f1b_order", *PIPELINE_MISTAKES[mistake])


# Plausible wrong pairwise all-to-alls (edits of dlsys/collectives/exchange.py): the received
# block stored in the slot of the rank it was sent to; every send first, then every receive
# (buffered sends make it deadlock-free, but the blocks leave back to back: not p-1 steps of
# alpha + n/p beta); the partners one off (r + k + 1, r - k - 1: rank r + 1 is never reached,
# the last step sends to itself).
ALLTOALL_MISTAKES = {
    "wrong_slot": (
        "        got[source] = comm.recv(source=source, tag=TAG)",
        "        got[dest] = comm.recv(source=source, tag=TAG)",
        {
            "test_one_block_to_every_other_rank",
            "test_time_is_p_minus_1_steps_of_one_block",
            "test_one_rank_keeps_its_own_block",
        },
    ),
    "send_all_first": (
        """    for k in range(1, p):
        dest, source = (r + k) % p, (r - k) % p
        send(comm, blocks[dest], dest, "alltoall", k - 1, dest)
        got[source] = comm.recv(source=source, tag=TAG)
""",
        """    for k in range(1, p):
        send(comm, blocks[(r + k) % p], (r + k) % p, "alltoall", k - 1, (r + k) % p)
    for k in range(1, p):
        got[(r - k) % p] = comm.recv(source=(r - k) % p, tag=TAG)
""",
        {
            "test_rank_r_gets_block_r_of_every_rank[4]",
            "test_rank_r_gets_block_r_of_every_rank[5]",
            "test_uneven_blocks_land_in_their_slots",
            "test_one_block_to_every_other_rank",
            "test_one_rank_keeps_its_own_block",
        },
    ),
    "partner_off_by_one": (
        "        dest, source = (r + k) % p, (r - k) % p",
        "        dest, source = (r + k + 1) % p, (r - k - 1) % p",
        {"test_one_rank_keeps_its_own_block"},
    ),
}


@pytest.mark.parametrize("mistake", ALLTOALL_MISTAKES)
def test_pairwise_alltoall_mistakes_get_partial_credit(tmp_path, mistake):
    grade_one_edit(tmp_path, "pairwise_alltoall", *ALLTOALL_MISTAKES[mistake])
