"""DP x TP grids: coordinates, groups along each axis, every registry collective on them,
placement on gpu_cluster's NVLink islands and each group's all-reduce cost there."""

import numpy as np
import pytest

from dlsys import collectives
from dlsys.comm import Grid, launch
from dlsys.machine.topology import gpu_cluster
from dlsys.train.tensor_parallel_costs import group_costs


def test_coordinates_tp_fastest_varying():
    grid = Grid(dp=3, tp=2)
    assert [grid.coords(r) for r in range(6)] == [(0, 0), (0, 1), (1, 0), (1, 1), (2, 0), (2, 1)]
    assert grid.tp_members(3) == [2, 3] and grid.dp_members(3) == [1, 3, 5]
    assert all(grid.rank_of(*grid.coords(r)) == r for r in range(6))
    assert Grid.of(8, 4).dp == 2


@pytest.mark.parametrize(
    "call, message",
    [
        (lambda: Grid.of(6, 4), r"tp must divide the world size 6 \(world = dp x tp\): one of \[1, 2, 3, 6\], got 4"),
        (lambda: Grid(0, 2), "dp must be an integer >= 1"),
        (lambda: Grid(2, 2).coords(4), r"rank must be in 0..3"),
    ],
)
def test_bad_grids_refused(call, message):
    with pytest.raises(ValueError, match=message):
        call()


def test_world_size_not_dp_times_tp_refused_before_any_collective():
    with pytest.raises(Exception, match=r"the world has 4 ranks, the layout dp x tp = 3 x 2 needs 6"):
        launch(lambda comm: Grid(3, 2).groups(comm), 4, "threads")


def expected(collective: str, xs: list, k: int, i: int):
    """What group rank i of k gets when group rank j passed xs[j] (root: group rank 0)."""
    if collective in ("allreduce", "reduce"):
        return sum(xs) if collective == "allreduce" or i == 0 else None
    if collective == "broadcast":
        return xs[0]
    if collective == "scatter":
        return np.array_split(xs[0].ravel(), k)[i]
    if collective in ("gather", "allgather"):
        return np.stack(xs) if collective == "allgather" or i == 0 else None
    if collective == "reduce_scatter":
        return np.array_split(sum(xs).ravel(), k)[i]
    if collective == "alltoall":
        return np.stack([np.array_split(x.ravel(), k)[i] for x in xs])
    return None  # barrier


def run_on_groups(comm, grid):
    """Every registry collective on this rank's DP group, then on its TP group."""
    out = {}
    for axis, group in zip(("dp", "tp"), grid.groups(comm)):
        for collective, algorithm in collectives.REGISTRY:
            x = np.arange(7.0) + 10 * comm.rank
            args = () if collective == "barrier" else (x,)
            out[axis, collective, algorithm] = getattr(collectives, collective)(group, *args, algorithm=algorithm)
    return out


@pytest.mark.parametrize("dp, tp", [(2, 2), (3, 2)])
def test_every_registry_collective_runs_on_each_axis(dp, tp):
    grid = Grid(dp, tp)
    values = launch(run_on_groups, grid.world_size, "threads", args=(grid,)).values
    for rank, got in enumerate(values):
        for (axis, collective, algorithm), value in got.items():
            members = grid.dp_members(rank) if axis == "dp" else grid.tp_members(rank)
            xs = [np.arange(7.0) + 10 * m for m in members]
            want = expected(collective, xs, len(members), members.index(rank))
            if want is None:
                assert value is None, (axis, collective, algorithm)
            else:
                np.testing.assert_array_equal(value, want, err_msg=f"{axis} {collective} {algorithm}")


@pytest.mark.parametrize("tp", [1, 2, 4, 8])
def test_tp_groups_stay_inside_an_nvlink_island(tp):
    topology, grid = gpu_cluster(), Grid(32 // tp, tp)
    for rank in range(grid.world_size):
        assert len({topology.supernode(m) for m in grid.tp_members(rank)}) == 1


def allreduce_on(comm, grid, axis, nbytes):
    dp_group, tp_group = grid.groups(comm)
    collectives.allreduce(tp_group if axis == "tp" else dp_group, np.ones(nbytes // 4, np.float32))


@pytest.mark.parametrize("dp, tp", [(2, 8), (4, 4)])
def test_group_costs_on_gpu_cluster(dp, tp):
    """A TP group on one NVLink island and a DP group whose ring stays on one link cost
    exactly the closed form; a DP ring mixing NVLink and InfiniBand hops costs less than
    the form charged on its slowest link, which bounds it."""
    grid, nbytes = Grid(dp, tp), 1 << 20
    costs = group_costs(grid, nbytes, "gpu-cluster")
    assert costs["tp"]["link"] == "nvlink4" and costs["tp"]["one_link"]
    assert costs["dp"]["link"] == "connectx7-ndr"
    for axis in ("tp", "dp"):
        measured = launch(
            allreduce_on, grid.world_size, "threads", topology="gpu-cluster", args=(grid, axis, nbytes)
        ).virtual_time_s
        if costs[axis]["one_link"]:
            assert measured == pytest.approx(costs[axis]["allreduce_s"], rel=1e-12)
        else:
            assert measured < costs[axis]["allreduce_s"]
    if dp == tp:  # the same all-reduce on as many ranks: NVLink's is the cheaper
        assert costs["tp"]["allreduce_s"] < costs["dp"]["allreduce_s"]
