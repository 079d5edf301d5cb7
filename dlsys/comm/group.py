"""A group of ranks seen as a world of its own (MPI_Comm_split): collectives run among
its members with group ranks 0..k-1, on the members' own clocks and links."""

from __future__ import annotations


class Group:
    """``comm`` restricted to ``members`` (global ranks, in group-rank order); everything
    but rank, size, send and recv is the communicator's own."""

    def __init__(self, comm, members):
        self._comm, self.members = comm, [int(m) for m in members]
        if comm.rank not in self.members or len(set(self.members)) != len(self.members):
            raise ValueError(f"members must list distinct ranks including this one ({comm.rank}), got {members}")
        self.rank, self.size = self.members.index(comm.rank), len(self.members)

    def send(self, buf, dest: int, tag: int = 0, label: str = "", **fields) -> None:
        self._comm.send(buf, self.members[dest], tag, label, **fields)

    def recv(self, source: int, tag: int = 0, label: str | None = None):
        return self._comm.recv(self.members[source], tag, label)

    def __getattr__(self, name):
        return getattr(self._comm, name)
