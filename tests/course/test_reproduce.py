"""The reproduction suite (dlsys.course.reproduce): every claim is complete and runs at
quick settings to one of the three verdicts; `dlsys reproduce` (JSON, table, bad names).
docs/'s generated tables: tests/course/test_docs.py."""

import contextlib
import io
import json

import pytest
from test_figure_lint import assert_lint_clean

from dlsys.cli import main
from dlsys.course import reproduce
from dlsys.viz.reproduce import claim_figure

RECORD_KEYS = {
    "claim",
    "paper",
    "where",
    "statement",
    "paper_value",
    "ours",
    "verdict",
    "why",
    "lines",
    "published",
    "dlsys",
    "rows",
    "plot",
    "quick",
    "wall_time_s",
}


@pytest.fixture(scope="module")
def quick_records():
    """`dlsys reproduce --quick --json`, every claim (what CI runs; seconds)."""
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        assert main(["reproduce", "--quick", "--json"]) == 0
    return json.loads(out.getvalue())


def test_every_claim_names_its_paper_figure_runner_rule_and_plot():
    assert reproduce.CLAIMS and len(reproduce.CLAIMS) == len(set(reproduce.CLAIMS))
    for name, claim in reproduce.CLAIMS.items():
        assert claim.name == name and name.replace("-", "").isalnum()
        assert claim.paper and claim.where and claim.statement.endswith(".") and claim.paper_value, name
        assert callable(claim.run) and callable(claim.judge), name
        assert claim.plot.kind in ("line", "bar") and claim.plot.x_title and claim.plot.y_title, name


def test_the_issues_claims_are_all_there():
    expected = {
        "ring-closed-form",
        "ssp-bound",
        "asp-vs-bsp",
        "terngrad-bytes",
        "qsgd-bytes",
        "onebit-bytes",
        "topk-bytes",
        "dropping-bytes",
        "dgc-bytes",
        "error-feedback",
        "linear-scaling",
        "warmup",
        "lars",
        "lamb",
        "taihulight-ring-vs-mpi",
        "taihulight-ps-vs-ring",
        "taihulight-little-difference",
        "p3-throughput",
    }
    assert expected <= set(reproduce.CLAIMS)


def test_quick_run_gives_every_claim_a_verdict_a_reason_and_a_figure(quick_records):
    assert [r["claim"] for r in quick_records] == list(reproduce.CLAIMS)
    for r in quick_records:
        assert set(r) == RECORD_KEYS and r["quick"] is True
        assert r["verdict"] in reproduce.VERDICTS and r["why"] and r["ours"], r["claim"]
        assert r["rows"] and len(claim_figure(r).data) >= 1, r["claim"]
        assert_lint_clean(claim_figure(r), r["claim"])  # the Papers page draws each one
    assert sum(r["wall_time_s"] for r in quick_records) < 120  # --quick runs in CI


def test_closed_forms_and_counts_hold_exactly_where_the_model_is_the_papers(quick_records):
    verdict = {r["claim"]: r["verdict"] for r in quick_records}
    assert verdict["ring-closed-form"] == verdict["ssp-bound"] == verdict["dgc-bytes"] == "holds"
    assert all(verdict[f"{m}-bytes"] == "holds" for m in ("terngrad", "qsgd", "onebit", "topk", "dropping"))


def test_a_claim_the_model_cannot_reach_says_why(quick_records):
    for r in quick_records:
        for judged in (r, *r["lines"]):
            if judged["verdict"] == "differs" and not (judged is r and r["lines"]):
                assert len(judged["why"]) > 40, r["claim"]


def test_a_claim_of_several_lines_reports_each_and_takes_the_worst(quick_records):
    for r in quick_records:
        verdicts = [line["verdict"] for line in r["lines"]]
        assert len(verdicts) != 1 or r["claim"] == "p3-throughput", r["claim"]  # quick: P3 runs ResNet-50 only
        if verdicts:
            assert r["verdict"] == reproduce.verdict.worst(verdicts), r["claim"]
            assert all(f"{line['line']} {line['verdict']}" in r["why"] for line in r["lines"]), r["claim"]
    lines = {r["claim"]: [line["line"] for line in r["lines"]] for r in quick_records}
    assert lines["dgc-bytes"] == ["alexnet", "resnet50"]
    assert (
        lines["taihulight-ps-vs-ring"] == lines["taihulight-little-difference"] == ["alexnet", "googlenet", "resnet50"]
    )


def test_one_failing_line_fails_the_claim_and_is_named():
    def judge(paper, measured):
        return {"a": ("holds", "a is fine"), "b": ("differs", "b is off by 2x"), "c": ("shape holds", "c trends")}

    fake = reproduce.Claim(
        "fake",
        "nobody 2026",
        "nowhere",
        "Three methods do it.",
        "1x",
        lambda quick: {"dlsys": {}, "ours": "", "rows": []},
        judge,
        reproduce.verdict.Plot("bar", "method", "x"),
    )
    record = reproduce.run_claim(fake, quick=True)
    assert record["verdict"] == "differs" and "b differs" in record["why"] and "a holds" in record["why"]
    assert record["lines"][1] == {"line": "b", "verdict": "differs", "why": "b is off by 2x"}
    assert reproduce.verdict.worst(["holds", "shape holds"]) == "shape holds"
    assert claim_figure(record).layout.title.text == "fake: differs (b)"


def test_error_feedback_reports_one_bit_sgds_line(quick_records):
    r = next(r for r in quick_records if r["claim"] == "error-feedback")
    line = {line["line"]: line for line in r["lines"]}
    assert list(line) == ["onebit", "topk", "dropping", "dgc"]
    # 1-bit SGD, the method error feedback was introduced for, gains nothing from it on digits
    assert line["onebit"]["verdict"] == "differs" and "never gains" in line["onebit"]["why"]
    assert all(line[m]["verdict"] == "holds" for m in ("topk", "dropping", "dgc"))
    assert r["verdict"] == "differs" and "onebit differs" in r["why"]


def test_verdict_rules():
    holds = reproduce.verdict.within(0.05, "because")
    assert holds({"a": 10.0}, {"dlsys": {"a": 10.4}})[0] == "holds"
    verdict, why = holds({"a": 10.0}, {"dlsys": {"a": 12.0}})
    assert verdict == "differs" and why.endswith("because") and "ours 12" in why
    assert holds({"a": 10.0, "b": 1.0}, {"dlsys": {"a": 10.0}})[0] == "holds"  # quick runs measure fewer labels
    each = reproduce.verdict.within_each(0.05, lambda label: f"because {label}")
    assert each({"a": 10.0, "b": 1.0}, {"dlsys": {"a": 10.4, "b": 2.0}}) == {
        "a": ("holds", "ours 10.4, the paper's 10 (relative gap 0.04), within 0.05"),
        "b": ("differs", "ours 2, the paper's 1 (relative gap 1), more than 0.05. because b"),
    }
    ranged = reproduce.verdict.in_range(lambda m: "out")
    assert ranged({"x": (2.3, 4.1)}, {"dlsys": {"x": 3.0}})[0] == "holds"
    assert ranged({"x": (2.3, 4.1)}, {"dlsys": {"x": 0.6}}) == ("differs", "out")


def test_cli_prints_the_table_and_refuses_unknown_claims(capsys):
    assert main(["reproduce", "--quick", "ring-closed-form", "onebit-bytes"]) == 0
    out = capsys.readouterr().out
    assert "paper's figure" in out and "ring-closed-form" in out and "holds" in out and "quick settings" in out
    assert main(["reproduce", "ring-closed-form", "nope"]) == 2
    err = capsys.readouterr().err
    assert "unknown claim 'nope'" in err and "valid: ring-closed-form, ssp-bound" in err
    assert main(["reproduce", "--write-docs", "lars"]) == 2
    assert "--write-docs" in capsys.readouterr().err


def test_feedback_effect_weighs_the_gap_of_the_means_against_the_seeds_spread():
    # stdev 0.01 on each side: a gap of 0.02 counts, 0.005 does not
    assert reproduce.compression.feedback_effect([0.90, 0.91, 0.92], [0.88, 0.89, 0.90])[0] == "helps"
    assert reproduce.compression.feedback_effect([0.88, 0.89, 0.90], [0.90, 0.91, 0.92])[0] == "hurts"
    effect, gap, noise = reproduce.compression.feedback_effect([0.900, 0.910, 0.920], [0.895, 0.905, 0.915])
    assert effect == "ties" and gap == pytest.approx(0.005) and noise == pytest.approx(0.01)
    # the larger spread decides: a noisy side hides a gap the quiet side would show
    assert reproduce.compression.feedback_effect([0.95, 0.95, 0.95], [0.80, 0.90, 1.00])[0] == "ties"
    with pytest.raises(ValueError, match="two or more seeds"):
        reproduce.compression.feedback_effect([0.9], [0.8, 0.9])


def _runs(accuracy: dict) -> list[dict]:
    """Synthetic feedback runs: {(method, feedback): [accuracy per seed]} at 2 epochs, dense 0.95."""
    runs = [{"method": "none", "feedback": False, "epochs": 2, "seed": s, "test_accuracy": 0.95} for s in range(3)]
    return runs + [
        {"method": m, "feedback": fb, "epochs": 2, "seed": s, "test_accuracy": a}
        for (m, fb), values in accuracy.items()
        for s, a in enumerate(values)
    ]


def test_error_feedback_verdict_follows_its_rule():
    from dlsys.experiments.compression import FEEDBACK_METHODS

    direction = {m: {"moved": 1.0 if m == "onebit" else 0.01, "cosine": 0.5} for m in FEEDBACK_METHODS}
    helps = {(m, True): [0.90, 0.91, 0.92] for m in FEEDBACK_METHODS} | {
        (m, False): [0.80, 0.81, 0.82] for m in FEEDBACK_METHODS
    }
    judge = reproduce.compression.judge_error_feedback
    assert {v for v, _ in judge({}, {"runs": _runs(helps), "direction": direction}).values()} == {"holds"}
    onebit_ties = helps | {("onebit", False): [0.90, 0.91, 0.92]}
    lines = judge({}, {"runs": _runs(onebit_ties), "direction": direction})
    verdict, why = lines["onebit"]
    assert verdict == "differs" and "never gains" in why and "100% of the weights" in why
    assert all(lines[m][0] == "holds" for m in FEEDBACK_METHODS if m != "onebit")
    topk_hurt = helps | {("topk", False): [0.95, 0.96, 0.97]}
    verdict, why = judge({}, {"runs": _runs(topk_hurt), "direction": direction})["topk"]
    assert verdict == "differs" and "lowers its accuracy at 2 epochs (-5.0 points" in why


def test_error_feedback_record_holds_every_seed(quick_records):
    from dlsys.experiments.compression import FEEDBACK_EPOCHS, FEEDBACK_METHODS, FEEDBACK_SEEDS

    r = next(r for r in quick_records if r["claim"] == "error-feedback")
    expected = {
        f"{m} {side}, {e} epochs, seed {s}"
        for m in FEEDBACK_METHODS
        for side in ("with", "without")
        for e in FEEDBACK_EPOCHS
        for s in FEEDBACK_SEEDS
    }
    expected |= {f"dense, {e} epochs, seed {s}" for e in FEEDBACK_EPOCHS for s in FEEDBACK_SEEDS}
    assert set(r["dlsys"]) == expected and all(0 < a <= 1 for a in r["dlsys"].values())
    assert "quick: the full run's accuracies as cached" in r["ours"]


def test_the_cached_feedback_runs_are_what_a_fresh_run_gives():
    from dlsys.experiments import compression as ex

    fresh = ex.feedback_runs(("topk",), 2, [3, 4])
    cached = [
        r for r in ex.cached_feedback() if r["epochs"] == 2 and r["seed"] in (3, 4) and r["method"] in ("none", "topk")
    ]
    assert fresh == cached  # deterministic: stale only if the code changed (`dlsys compress --feedback --write-cache`)


@pytest.mark.parametrize(
    "methods,epochs,seeds,match",
    [
        (("nope",), 2, [0, 1], "methods: need one or more of none, "),
        ((), 2, [0, 1], "methods: need one or more"),
        (("topk",), 0, [0, 1], "epochs must be an integer >= 1"),
        (("topk",), 2, [0, 0], "seeds: need two or more distinct seeds"),
        (("topk",), 2, [-1, 0], "seed must be an integer >= 0"),
    ],
)
def test_feedback_runs_refuse_bad_input_before_training(methods, epochs, seeds, match):
    from dlsys.experiments import compression as ex

    with pytest.raises(ValueError, match=match):
        ex.feedback_runs(methods, epochs, seeds)
