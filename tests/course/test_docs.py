"""docs/ is what the code gives (issue 24): every generated block is the code's output
(the fast ones here, the ones in ``docs.SLOW`` under ``-m slow``), the generator rewrites
only its blocks, and no typed result creeps back into a doc, a lesson's prose or an app
caption.

The typed-result audit flags a number with a unit of time, a ratio (``4x``) or a percentage
outside generated and measured blocks, code (fenced or inline), formulas and links; such a
number is the code's result unless it is one of the kinds below. ``TYPED_LEFT`` counts what
each file still carries (inputs such as a link's 14 GB/s are not flagged; a paper's figure
or a measured wall time is); it may only go down.

    python tests/course/test_docs.py        # list every flagged line
"""

import ast
import re
from pathlib import Path

import pytest

from dlsys.course import docs, reproduce

ROOT = Path(__file__).resolve().parents[2]
FENCE = re.compile(r"```.*?```", re.S)
# Kinds that are not results of the code: code and CLI examples, formulas, links, dates and
# years, citations (figure, table, section, equation, page, lesson, issue numbers).
NOT_RESULTS = re.compile(
    "|".join(
        [
            r"`[^`\n]*`",
            r"\$\$.*?\$\$",
            r"\$[^$\n]+\$",
            r"\]\([^)]*\)",
            r"https?://\S+",
            r"\b(?:19|20)\d\d(?:-\d\d-\d\d)?\b",
            r"\b(?:[Ff]ig(?:ure)?s?\.?|[Tt]ables?|[Ss]ec(?:tion)?s?\.?|§|[Ee]q\.|pp?\.|[Ll]essons?|[Ii]ssues?)\s*[\d.,-]+",
        ]
    ),
    re.S,
)
RESULT = re.compile(r"(?<![\w.])\d[\d,.]*(?:\s*(?:-|to)\s*\d[\d,.]*)?\s*(?:ms|µs|us|ns|s|min|x|×|%)(?!\w)")
TYPED_LEFT = {  # what each file still types, and why it is not (yet) generated
    "docs/app.md": 24,  # page load times and browser-test timings (measured, no writer yet)
    "docs/course.md": 3,  # inputs (top-k at 1 %) and reading times
    "docs/exercises.md": 5,  # the grader's time limits and run times
    "docs/flows.md": 18,  # SimGrid's figures (optional) and solver speed (measured, no writer yet)
    "docs/large_batch.md": 4,  # the study's settings and wall time
    "docs/memory.md": 2,  # inputs (GPT-3's layer shape, t = 8) and a test's 99 % threshold
    "docs/network_stack_and_io.md": 1,  # a test's input range
    "docs/parallelism.md": 3,  # layouts written dp x tp (2 x 2, 3 x 2), not ratios
    "docs/performance.md": 90,  # the record of past measurements (the page says so)
    "docs/scheduling.md": 5,  # compute as 3x forward, 10 GbE's latency beside a slice, FIFO connections' past changes;
    # the baton's 2 ms re-check and the speed-up it measured (moved from architecture.md)
    "docs/planner.md": 8,  # inputs (a GEMM tile, a formula, model sizes), the papers' figures (Megatron's TFLOP/s and shares of
    # peak, Korthikanti's), the published matmul ceiling the kernel model starts from, SP's 25% by count
    "docs/engine.md": 5,  # the engine's measured costs and constants (a send's Python, the collector's share, MPI polls' back-off, the deadlock quiet time), moved from architecture.md
    "docs/compression.md": 1,  # Gradient Dropping's sampling bound (a design constant), moved from architecture.md
    "docs/taihulight.md": 9,  # the machine's published constants and the paper's 2.3-4.1x
    "docs/training.md": 4,  # inputs (a 4x straggler, 4x the batch)
    "lessons/01_why_distribute.py": 1,  # an exercise's input (a GPU 4x slower)
    "lessons/05_parameter_server.py": 2,  # exercises' inputs (straggler factors)
    "lessons/06_data_vs_model_parallel.py": 1,  # an exercise's target (a 10% bubble)
    "lessons/07_real_bytes.py": 1,  # an input (the receiver holds the array 0.2 s)
    "lessons/08_gradient_compression.py": 4,  # inputs (top-k at 1%) and a link's cost per byte
    "lessons/12_taihulight_case_study.py": 3,  # the paper's 2.3-4.1x, the 30 % roofline, an exercise's 5 %
    "app/views/collectives.py": 1,  # a formula's factor 2
    "app/views/performance.py": 1,  # a formula's constants (k = 9, 5)
    "app/views/taihulight.py": 1,  # the paper's 512 nodes and the 30 % roofline
}


def generated_and_measured(text: str) -> str:
    return docs.MEASURED.sub("", docs.BLOCK.sub("", text))


def doc_texts():
    for path in sorted((ROOT / "docs").glob("*.md")):
        if path.name != "architecture.md":  # the lead's, described in words
            yield path, FENCE.sub("", generated_and_measured(path.read_text()))


def lesson_texts():
    for path in sorted((ROOT / "lessons").glob("*.py")):
        cells = re.split(r"^# %%", path.read_text(), flags=re.M)
        prose = [line[2:] for cell in cells if cell.startswith(" [markdown]") for line in cell.splitlines()[1:]]
        yield path, FENCE.sub("", "\n".join(prose))


CALLS = {
    "caption",
    "markdown",
    "info",
    "warning",
    "write",
    "success",
    "error",
    "metric",
    "header",
    "subheader",
    "title",
    "latex",
}


def caption_texts():
    """The literal parts of the strings app pages write (a formatted value comes from the code)."""
    for path in sorted((ROOT / "app" / "views").glob("*.py")):
        parts = []
        for node in ast.walk(ast.parse(path.read_text())):
            if (
                isinstance(node, ast.Call) and getattr(node.func, "attr", getattr(node.func, "id", None)) in CALLS
            ):  # st.caption, col.caption, layout.caption
                specs = {
                    id(c)
                    for arg in node.args
                    for f in ast.walk(arg)
                    if isinstance(f, ast.FormattedValue) and f.format_spec
                    for c in ast.walk(f.format_spec)
                }
                parts += [
                    c.value
                    for arg in node.args
                    for c in ast.walk(arg)
                    if isinstance(c, ast.Constant) and isinstance(c.value, str) and id(c) not in specs
                ]
        yield path, "\n".join(parts)


def typed_results() -> dict[str, list[str]]:
    """Per file, the lines that carry a typed result."""
    found: dict[str, list[str]] = {}
    for source in (doc_texts, lesson_texts, caption_texts):
        for path, text in source():
            lines = [line.strip() for line in NOT_RESULTS.sub(" ", text).splitlines() if RESULT.search(line)]
            if lines:
                found[str(path.relative_to(ROOT))] = lines
    return found


def test_no_typed_results_beyond_what_is_left():
    found = typed_results()
    grown = {f: len(lines) for f, lines in found.items() if len(lines) > TYPED_LEFT.get(f, 0)}
    assert not grown, (
        f"typed results (a time, ratio or percentage) in {grown}: generate them "
        "(dlsys/course/docs.py, a code cell's print, an f-string) or list them with "
        "`python tests/course/test_docs.py`"
    )
    shrunk = {f: len(found.get(f, [])) for f, n in TYPED_LEFT.items() if len(found.get(f, [])) < n}
    assert not shrunk, f"fewer typed results than TYPED_LEFT says: lower it to {shrunk}"


@pytest.fixture(scope="module")
def quick_records():
    return reproduce.run_claims(quick=True)


def test_fast_generated_tables_are_what_the_code_gives(quick_records):
    stale = docs.stale_tables(claims=quick_records, slow=False)
    assert not stale, f"generated tables differ from the code: {stale}; run `dlsys reproduce --write-docs`"


def test_a_roundoff_table_holds_its_zeros_exactly_and_its_roundoff_to_the_decade():
    """Another CPU's BLAS kernel moves a roundoff's digits, not its decade nor its zeros."""
    assert docs.same_roundoff("| 2e-06 | 0e+00 | bitwise |", "| 5e-06 | 0e+00 | bitwise |")
    assert not docs.same_roundoff("| 2e-06 |", "| 3e-05 |")  # a decade and more
    assert not docs.same_roundoff("| 0e+00 |", "| 1e-16 |")  # an order that was exact is no more
    assert not docs.same_roundoff("| bitwise |", "| 1.4e-07 |")


@pytest.mark.slow
@pytest.mark.timeout(900)
def test_slow_generated_tables_are_what_the_code_gives(quick_records):
    stale = [(f, name) for f, name in docs.stale_tables(claims=quick_records, skip=docs.SAMPLED) if name in docs.SLOW]
    assert not stale, f"generated tables differ from the code: {stale}; run `dlsys reproduce --write-docs`"


@pytest.mark.slow
def test_the_sampled_slow_tables_hold_a_row_the_code_gives_now():
    assert docs.SAMPLED <= docs.SLOW and set(docs.SAMPLES) == docs.SAMPLED
    missing = docs.sampled_rows_missing()
    assert not missing, f"rows the code gives now, not in docs: {missing}; run `python -m dlsys.course.docs`"


def test_a_sampled_row_that_changed_is_found(tmp_path, monkeypatch):
    page = tmp_path / "x.md"
    page.write_text("<!-- generated: scheduling.p3_sweeps -->\n| a | 1 |\n<!-- end generated -->\n")
    monkeypatch.setitem(docs.SAMPLES, "scheduling.p3_sweeps", lambda: [["a", "1"]])
    assert docs.sampled_rows_missing(tmp_path) == []
    monkeypatch.setitem(docs.SAMPLES, "scheduling.p3_sweeps", lambda: [["a", "2"]])
    assert docs.sampled_rows_missing(tmp_path) == [("x.md", "scheduling.p3_sweeps", "| a | 2 |")]


def test_docs_generator_rewrites_blocks_and_refuses_unknown_names(tmp_path, quick_records):
    page = tmp_path / "x.md"
    page.write_text("before\n<!-- generated: reproductions -->\nstale\n<!-- end generated -->\nafter\n")
    assert docs.stale_tables(tmp_path, quick_records) == [("x.md", "reproductions")]
    assert docs.write_docs(tmp_path, quick_records) == [page]
    text = page.read_text()
    assert text.startswith("before\n") and text.endswith("after\n") and "| `ring-closed-form` |" in text
    assert docs.stale_tables(tmp_path, quick_records) == []
    page.write_text("<!-- generated: nope -->\n<!-- end generated -->\n")
    with pytest.raises(ValueError, match="generated table 'nope' is unknown; valid: large_batch.accuracy"):
        docs.stale_tables(tmp_path, quick_records)


def test_measured_blocks_are_rewritten_with_machine_and_command(tmp_path):
    page = tmp_path / "performance.md"
    page.write_text("a\n<!-- measured: bench.x -->\nold\n<!-- end measured -->\nb\n")
    docs.write_measured({"bench.x": "| t |\n|---|\n| 1 ms |\n"}, "python bench.py", page)
    text = page.read_text()
    assert text.startswith("a\n<!-- measured: bench.x -->\nMeasured ") and "by `python bench.py` on " in text
    assert "cores, load average" in text and text.endswith("| 1 ms |\n<!-- end measured -->\nb\n")
    with pytest.raises(ValueError, match="no measured block bench.y"):
        docs.write_measured({"bench.y": ""}, "python bench.py", page)


if __name__ == "__main__":
    for file, lines in typed_results().items():
        print(f"{file}: {len(lines)}")
        for line in lines:
            print(f"    {line[:150]}")
