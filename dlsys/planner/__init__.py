"""The layout of a large run (issues 27 and 35): DP x TP x PP with ZeRO on a GPU cluster.
Devices as data (``devices``), model presets (``models``), a layout and what a GPU of it
holds (``plan``), a kernel's time from first principles (``efficiency``), a step's time
in closed form (``cost``), the search over every layout that fits (``search``), and the
published runs it is held to (``published``)."""

from .cost import CAVEATS, COMPONENTS, breakdown, step_time
from .devices import DEVICES, Device, cluster, device_of
from .models import MODELS, Model, model_of
from .plan import Plan, memory
from .search import search

__all__ = [
    "CAVEATS",
    "COMPONENTS",
    "DEVICES",
    "MODELS",
    "Device",
    "Model",
    "Plan",
    "breakdown",
    "cluster",
    "device_of",
    "memory",
    "model_of",
    "search",
    "step_time",
]
