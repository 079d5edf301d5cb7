"""Plotly figures from traces and records (no streamlit here: the app and the lessons share them).

Modules: ``style`` (the shared figure style, registered as plotly's default template by
every figure module on import, log axes with unit ticks, rank names, concept and span colours;
numbers and ticks come from ``dlsys.units``, at the bottom of the layers), ``comm`` (figures of
one run's traffic: timeline, bytes per link and per rank), ``animation`` (one run's messages
animated, on ``layouts``, where the ranks stand, and ``messages``, each message's life, colour
and step; its Play buttons and slider from ``controls``), ``ring_steps`` (the ring all-reduce step
by step), ``costs`` (cost-model curves and scaling plots from experiment records), ``datapath``
(memory traffic of the real data path, measured bandwidth, emulation scale), ``catalogue``
(the concept map), ``lint`` (what a class would find wrong with a figure 1280 px wide: units,
ticks, log axes, binary bytes, labels that overlap or clip, subplots of one quantity on one
scale), and a module per topic of the course (``schedule``, ``network_stack``, ``taihulight``...).
"""

# Nothing is imported here: a caller of one figure module must not pay for importing plotly's
# other figures.
