"""The layout of a large run (issue 27): DP x TP x PP with ZeRO on a GPU cluster, a step's
time and a rank's memory in closed form (``cost``), model and device presets (``models``),
and the search over every layout that fits (``search``)."""

from .cost import COMPONENTS, Plan, breakdown, memory, step_time
from .models import DEVICES, MODELS, Device, Model, device_of, model_of
from .search import search

__all__ = [
    "COMPONENTS",
    "DEVICES",
    "MODELS",
    "Device",
    "Model",
    "Plan",
    "breakdown",
    "device_of",
    "memory",
    "model_of",
    "search",
    "step_time",
]
