"""dlsys: a teaching toolkit for distributed deep learning. Real data, virtual time."""

from .lazy import lazy

__version__ = "0.1.0"
# imported on first use (dlsys.lazy): ``import dlsys.collectives.ring`` runs this file first
__getattr__, __all__ = lazy(__name__, comm=["launch", "LaunchResult", "RankFailed", "DeadlockError"])
