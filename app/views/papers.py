"""Papers: every published claim dlsys teaches, the paper's figure beside ours with a verdict
(dlsys.course.reproduce at quick settings; ``dlsys reproduce`` prints the same)."""

import cached
import streamlit as st
from charts import chart
from layout import caption, markdown
from urlstate import url_key

from dlsys.course.reproduce import VERDICTS
from dlsys.viz.reproduce import claim_figure

st.title("Papers: reproduced or explained")
markdown(
    "Each row is one statement of a paper this course teaches, run again in dlsys. **holds**: our number is the "
    "paper's within a stated tolerance; **shape holds**: the trend holds on our smaller problem, not the number; "
    "**differs**: and why. A claim of several methods or models has a verdict per line and takes the worst "
    "line's, so no line's failure hides behind the others. A figure is reproduced by modelling what the paper's system did, never by tuning a "
    "constant until the number appears. Quick settings: `dlsys reproduce` runs the full ones."
)

try:
    records = cached.reproductions()
except ValueError as exc:  # a stale large-batch cache: never show a stale figure
    st.error(f"{exc}.")
    st.stop()

counts = {v: sum(r["verdict"] == v for r in records) for v in VERDICTS}
for col, (verdict, n) in zip(st.columns(len(counts)), counts.items()):
    col.metric(verdict, n)
st.dataframe(
    [
        {
            "claim": r["claim"],
            "paper": r["paper"],
            "where": r["where"],
            "paper's figure": r["paper_value"],
            "dlsys": r["ours"],
            "verdict": r["verdict"],
            "why": r["why"],
        }
        for r in records
    ],
    hide_index=True,
    use_container_width=True,
)

names = [r["claim"] for r in records]
first = next((i for i, r in enumerate(records) if r["verdict"] == "differs"), 0)  # open on what to discuss
record = records[names.index(st.selectbox("claim", names, index=first, key=url_key("papers_claim", names)))]
markdown(f"**{record['paper']}**, {record['where']}: {record['statement']}")
chart(claim_figure(record), f"papers_{record['claim']}")
caption(f"Paper: {record['paper_value']}. dlsys: {record['ours']}. Verdict: **{record['verdict']}**, {record['why']}.")
if record["lines"]:  # a claim of several methods or models: each line's verdict; the claim's is the worst
    st.dataframe(
        [{"line": line["line"], "verdict": line["verdict"], "why": line["why"]} for line in record["lines"]],
        hide_index=True,
        use_container_width=True,
    )
