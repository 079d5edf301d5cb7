"""A group of ranks seen as a world of its own (MPI_Comm_split): collectives run among
its members with group ranks 0..k-1, on the members' own clocks and links. ``Grid`` lays a
world out as DP x TP and gives each rank its group along each axis."""

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


class Grid:
    """A DP x TP layout of ``dp * tp`` ranks: rank -> (dp index, tp index), TP fastest-varying.

        rank = d * tp + t,   (d, t) = divmod(rank, tp)

    Ranks of one tensor-parallel group are consecutive (d * tp .. d * tp + tp - 1), so on a
    machine whose islands hold consecutive ranks (gpu_cluster: 8 GPUs on NVLink) a TP group
    of tp <= 8 dividing 8 stays inside one island; a data-parallel group takes one rank of
    every TP group (t, t + tp, t + 2 tp, ...). This is Megatron-LM's default order "tp-dp"
    (megatron/core/parallel_state.py, ``RankGenerator`` with order "tp-cp-ep-dp-pp" and
    ``generate_masked_orthogonal_rank_groups``: the first-named axis varies fastest) and
    picotron's (picotron/process_group_manager.py: ``torch.arange(world_size).view(dp_size,
    pp_size, cp_size, tp_size)``, tp last)."""

    def __init__(self, dp: int, tp: int):
        for name, value in (("dp", dp), ("tp", tp)):
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ValueError(f"{name} must be an integer >= 1, got {value!r}")
        self.dp, self.tp = dp, tp

    @classmethod
    def of(cls, world_size: int, tp: int) -> Grid:
        """The layout of ``world_size`` ranks with TP degree ``tp``; ValueError unless tp divides it."""
        if isinstance(tp, bool) or not isinstance(tp, int) or tp < 1 or world_size % tp:
            divisors = [k for k in range(1, world_size + 1) if world_size % k == 0]
            raise ValueError(f"tp must divide the world size {world_size} (world = dp x tp): one of "
                             f"{divisors}, got {tp!r}")
        return cls(world_size // tp, tp)

    @property
    def world_size(self) -> int:
        return self.dp * self.tp

    def coords(self, rank: int) -> tuple[int, int]:
        """(dp index, tp index) of a global rank."""
        if not 0 <= rank < self.world_size:
            raise ValueError(f"rank must be in 0..{self.world_size - 1}, got {rank}")
        return divmod(rank, self.tp)

    def rank_of(self, d: int, t: int) -> int:
        return d * self.tp + t

    def tp_members(self, rank: int) -> list[int]:
        """The global ranks of ``rank``'s tensor-parallel group, in group-rank order."""
        d, _ = self.coords(rank)
        return [self.rank_of(d, t) for t in range(self.tp)]

    def dp_members(self, rank: int) -> list[int]:
        """The global ranks of ``rank``'s data-parallel group, in group-rank order."""
        _, t = self.coords(rank)
        return [self.rank_of(d, t) for d in range(self.dp)]

    def groups(self, comm) -> tuple[Group, Group]:
        """(data-parallel group, tensor-parallel group) of this rank, as sub-communicators."""
        if comm.size != self.world_size:
            raise ValueError(f"the world has {comm.size} ranks, the layout dp x tp = {self.dp} x {self.tp} "
                             f"needs {self.world_size}")
        return Group(comm, self.dp_members(comm.rank)), Group(comm, self.tp_members(comm.rank))

    def __repr__(self):
        return f"Grid(dp={self.dp}, tp={self.tp})"
