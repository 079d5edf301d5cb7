"""The reproduction suite (dlsys.experiments.reproduce): every claim is complete and runs at
quick settings to one of the three verdicts; `dlsys reproduce` (JSON, table, bad names).
docs/'s generated tables: tests/test_docs.py."""

import contextlib
import io
import json

import pytest

from dlsys.cli import main
from dlsys.experiments import reproduce
from dlsys.viz.reproduce import claim_figure

RECORD_KEYS = {"claim", "paper", "where", "statement", "paper_value", "ours", "verdict", "why", "published", "dlsys",
               "rows", "plot", "quick", "wall_time_s"}


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
    expected = {"ring-closed-form", "ssp-bound", "asp-vs-bsp", "terngrad-bytes", "qsgd-bytes", "onebit-bytes",
                "topk-bytes", "dropping-bytes", "dgc-bytes", "error-feedback", "linear-scaling", "warmup", "lars",
                "lamb", "taihulight-ring-vs-mpi", "taihulight-ps-vs-ring", "taihulight-little-difference",
                "p3-throughput"}
    assert expected <= set(reproduce.CLAIMS)


def test_quick_run_gives_every_claim_a_verdict_a_reason_and_a_figure(quick_records):
    assert [r["claim"] for r in quick_records] == list(reproduce.CLAIMS)
    for r in quick_records:
        assert set(r) == RECORD_KEYS and r["quick"] is True
        assert r["verdict"] in reproduce.VERDICTS and r["why"] and r["ours"], r["claim"]
        assert r["rows"] and len(claim_figure(r).data) >= 1, r["claim"]
    assert sum(r["wall_time_s"] for r in quick_records) < 120  # --quick runs in CI


def test_closed_forms_and_counts_hold_exactly_where_the_model_is_the_papers(quick_records):
    verdict = {r["claim"]: r["verdict"] for r in quick_records}
    assert verdict["ring-closed-form"] == verdict["ssp-bound"] == verdict["dgc-bytes"] == "holds"
    assert all(verdict[f"{m}-bytes"] == "holds" for m in ("terngrad", "qsgd", "onebit", "topk", "dropping"))


def test_a_claim_the_model_cannot_reach_says_why(quick_records):
    for r in quick_records:
        if r["verdict"] == "differs":
            assert len(r["why"]) > 40, r["claim"]


def test_verdict_rules():
    holds = reproduce.within(0.05, "because")
    assert holds({"a": 10.0}, {"dlsys": {"a": 10.4}})[0] == "holds"
    verdict, why = holds({"a": 10.0}, {"dlsys": {"a": 12.0}})
    assert verdict == "differs" and why.endswith("because") and "ours 12" in why
    assert holds({"a": 10.0, "b": 1.0}, {"dlsys": {"a": 10.0}})[0] == "holds"  # quick runs measure fewer labels
    ranged = reproduce.in_range(lambda m: "out")
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
