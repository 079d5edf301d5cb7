"""Plotly figures from traces and records (no streamlit here: the app and the lessons share them).

Modules: ``style`` (the shared figure style, registered as plotly's default template by
every figure module on import, log axes with unit ticks, rank names; numbers and ticks come
from ``dlsys.units``, at the bottom of the layers), ``comm`` (figures of one run's trace: message animation, timeline,
bytes per link, the ring step by step), ``costs`` (cost-model curves and scaling plots from
experiment records), ``datapath`` (memory traffic of the real data path, measured bandwidth,
emulation scale), ``catalogue`` (the concept map), ``lint`` (what a class would find wrong with
a figure 1280 px wide: units, ticks, log axes, binary bytes, labels that overlap or clip,
subplots of one quantity on one scale).
"""

# Nothing is imported here: a caller of one figure module must not pay for importing plotly's
# other figures.
