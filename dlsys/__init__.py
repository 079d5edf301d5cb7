"""dlsys: a teaching toolkit for distributed deep learning. Real data, virtual time."""

from .comm import DeadlockError, LaunchResult, RankFailed, launch

__version__ = "0.1.0"
__all__ = ["launch", "LaunchResult", "RankFailed", "DeadlockError"]
