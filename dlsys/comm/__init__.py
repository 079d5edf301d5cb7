"""Communication: the Communicator, virtual clocks, backends and the trace."""

from .communicator import Communicator, Request
from .launch import BACKENDS, DeadlockError, LaunchResult, RankFailed, launch
from .trace import Message, Span, Trace

__all__ = ["Communicator", "Request", "launch", "LaunchResult", "RankFailed", "DeadlockError",
           "BACKENDS", "Trace", "Span", "Message"]
