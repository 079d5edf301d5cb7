"""Graded: exercise tensor_parallel_mlp (dlsys.train.tensor_parallel_layers: Region's f and g
without sequence parallelism, ColumnParallelLinear and RowParallelLinear).

Megatron's MLP Z = GELU(X A + a) B + b on t = 2 and 4 ranks (X of shape (3, 4, 6): batch,
sequence, model; A (6, 8) split by columns, B (8, 6) by rows), judged against the unsplit
MLP computed here with numpy; each layer alone too, so a mistake in one costs only its tests."""

import numpy as np
import pytest

pytestmark = pytest.mark.ex_tensor_parallel_mlp

N, S, D, F = 3, 4, 6, 8


def tensors() -> dict:
    rng = np.random.default_rng(5)
    return {
        "x": rng.standard_normal((N, S, D)),
        "A": rng.standard_normal((D, F)) / 3,
        "a": rng.standard_normal(F),
        "B": rng.standard_normal((F, D)) / 3,
        "b": rng.standard_normal(D),
        "dz": rng.standard_normal((N, S, D)),
        "y": rng.standard_normal((N, S, F)),
    }


def observe_parallel(t: int, part: str, x, A, a, B, b, dz, y):
    """Runs in the untrusted child, on t ranks, rank i holding A's and a's columns i and B's
    rows i (b whole). part "column": Y_i = forward(x), dX = backward(dY_i = dz's columns i
    of (N, S, F) ``y``); "row": Z = forward(y's columns i), dY_i = backward(dz); "mlp": the
    column layer, GELU and the row layer, forward then backward of dz. Per rank: the
    outputs, the gradients of its shards, its bytes sent after forward and in all."""
    from dlsys import launch
    from dlsys.grading.testing import LAUNCH_TIMEOUT_S
    from dlsys.learn.transformer import GELU
    from dlsys.train.tensor_parallel_layers import ColumnParallelLinear, Region, RowParallelLinear

    def program(comm):
        i, region = comm.rank, Region(comm)
        column, row = ColumnParallelLinear(region), RowParallelLinear(region)
        column.params = {"W": np.split(A, t, axis=1)[i].copy(), "b": np.split(a, t)[i].copy()}
        row.params = {"W": np.split(B, t, axis=0)[i].copy(), "b": b.copy()}
        for layer in (column, row):
            layer.grads = {k: np.zeros_like(v) for k, v in layer.params.items()}
        if part == "column":
            out = column.forward(x)
            forward_nbytes = comm.bytes_sent
            grad_in = column.backward(np.split(y, t, axis=-1)[i])
        elif part == "row":
            out = row.forward(np.split(y, t, axis=-1)[i])
            forward_nbytes = comm.bytes_sent
            grad_in = row.backward(dz)
        else:
            gelu = GELU()
            out = row.forward(gelu.forward(column.forward(x)))
            forward_nbytes = comm.bytes_sent
            grad_in = column.backward(gelu.backward(row.backward(dz)))
        return {
            "out": out,
            "grad_in": grad_in,
            "column_grads": column.grads,
            "row_grads": row.grads,
            "forward_nbytes": forward_nbytes,
            "nbytes": comm.bytes_sent,
        }

    return launch(program, t, "threads", timeout_s=LAUNCH_TIMEOUT_S).values


def unsplit(v: dict) -> dict:
    """The oracle: the whole MLP on one rank (GELU for the nonlinearity)."""
    from dlsys.learn.transformer import GELU

    gelu = GELU()
    h = v["x"] @ v["A"] + v["a"]
    g = gelu.forward(h)
    z = g @ v["B"] + v["b"]
    rows = lambda m: m.reshape(-1, m.shape[-1])  # noqa: E731
    dg = v["dz"] @ v["B"].T
    dh = gelu.backward(dg)
    return {
        "z": z,
        "dx": dh @ v["A"].T,
        "dA": rows(v["x"]).T @ rows(dh),
        "da": rows(dh).sum(0),
        "dB": rows(g).T @ rows(v["dz"]),
        "db": rows(v["dz"]).sum(0),
        "h": h,
        "column_dx": v["y"] @ v["A"].T,
        "column_dA": rows(v["x"]).T @ rows(v["y"]),
        "row_z": v["y"] @ v["B"] + v["b"],
        "row_dy": v["dz"] @ v["B"].T,
        "row_dB": rows(v["y"]).T @ rows(v["dz"]),
    }


def off(got, want) -> str:
    got = np.asarray(got)
    if got.shape != np.shape(want):
        return f"of shape {got.shape}, not {np.shape(want)}"
    scale = np.sum(got * want) / np.sum(want * want)
    if np.allclose(got, scale * want) and not np.isclose(scale, 1):
        return f"{scale:.3g}x the right value"
    return f"off by up to {np.max(np.abs(got - want)):.3g}"


def close(got, want) -> bool:
    return np.shape(got) == np.shape(want) and np.allclose(got, want)


@pytest.mark.parametrize("t", [2, 4])
def test_column_parallel_forward_gives_each_rank_its_columns_without_communication(student, t):
    v = tensors()
    want = unsplit(v)
    for i, r in enumerate(student.run(observe_parallel, t=t, part="column", **v)):
        expected = np.split(want["h"], t, axis=-1)[i]
        assert close(r["out"], expected), (
            f"rank {i}'s column-parallel output is {off(r['out'], expected)}: Y_i = X A_i + a_i, where f is the "
            "identity in forward (an all-reduce of X would sum t copies of it)"
        )
        assert r["forward_nbytes"] == 0, (
            f"rank {i} sent {r['forward_nbytes']} B in the column-parallel forward; f sends nothing forward"
        )


@pytest.mark.parametrize("t", [2, 4])
def test_column_parallel_backward_sums_the_input_gradient_over_the_ranks(student, t):
    v = tensors()
    want = unsplit(v)
    for i, r in enumerate(student.run(observe_parallel, t=t, part="column", **v)):
        assert close(r["grad_in"], want["column_dx"]), (
            f"rank {i}'s dX is {off(r['grad_in'], want['column_dx'])}: each rank's dY_i A_i^T is a partial sum; "
            "f's backward all-reduces (sums) them over the group"
        )
        dA = np.split(want["column_dA"], t, axis=1)[i]
        assert close(r["column_grads"]["W"], dA), (
            f"rank {i}'s dA_i is {off(r['column_grads']['W'], dA)}: X^T dY_i over every (batch, position) row"
        )
        da = np.split(v["y"].reshape(-1, F).sum(0), t)[i]
        assert close(r["column_grads"]["b"], da), (
            f"rank {i}'s da_i is {off(r['column_grads']['b'], da)}: dY_i summed over the rows"
        )


@pytest.mark.parametrize("t", [2, 4])
def test_row_parallel_forward_all_reduces_the_partial_products_and_adds_b_once(student, t):
    v = tensors()
    want = unsplit(v)
    for i, r in enumerate(student.run(observe_parallel, t=t, part="row", **v)):
        if close(r["out"], want["row_z"] + (t - 1) * v["b"]):
            pytest.fail(f"rank {i} added the bias b on every rank before the all-reduce: add it once, after")
        assert close(r["out"], want["row_z"]), (
            f"rank {i}'s row-parallel output is {off(r['out'], want['row_z'])}: Z = sum_i Y_i B_i + b; g all-reduces "
            "the ranks' partial products Y_i B_i in forward (without it each rank has only its own part)"
        )


@pytest.mark.parametrize("t", [2, 4])
def test_row_parallel_backward_needs_no_communication(student, t):
    v = tensors()
    want = unsplit(v)
    for i, r in enumerate(student.run(observe_parallel, t=t, part="row", **v)):
        dy = np.split(want["row_dy"], t, axis=-1)[i]
        assert close(r["grad_in"], dy), f"rank {i}'s dY_i is {off(r['grad_in'], dy)}: dZ B_i^T"
        dB = np.split(want["row_dB"], t, axis=0)[i]
        assert close(r["row_grads"]["W"], dB), f"rank {i}'s dB_i is {off(r['row_grads']['W'], dB)}: Y_i^T dZ"
        assert close(r["row_grads"]["b"], want["db"]), (
            f"rank {i}'s db is {off(r['row_grads']['b'], want['db'])}: dZ summed over the rows"
        )
        sent = r["nbytes"] - r["forward_nbytes"]
        assert sent == 0, f"rank {i} sent {sent} B in the row-parallel backward; g's backward is the identity"


@pytest.mark.parametrize("t", [2, 4])
def test_the_mlp_equals_the_unsplit_one_forward_and_backward(student, t):
    v = tensors()
    want = unsplit(v)
    for i, r in enumerate(student.run(observe_parallel, t=t, part="mlp", **v)):
        assert close(r["out"], want["z"]), f"rank {i}'s MLP output is {off(r['out'], want['z'])} of the unsplit MLP's"
        assert close(r["grad_in"], want["dx"]), f"rank {i}'s dX is {off(r['grad_in'], want['dx'])} of the unsplit MLP's"
        for layer, name, how, key in (("column", "W", 1, "dA"), ("column", "b", 0, "da"), ("row", "W", 0, "dB")):
            expected = np.split(want[key], t, axis=how)[i]
            got = r[f"{layer}_grads"][name]
            assert close(got, expected), (
                f"rank {i}'s {key}_{i} is {off(got, expected)} of its part of the unsplit MLP's"
            )


@pytest.mark.parametrize("t", [2, 4])
def test_one_all_reduce_forward_and_one_backward(student, t):
    v = tensors()
    allreduce_nbytes = 2 * (t - 1) * v["x"].nbytes // t  # a ring all-reduce of an (N, S, D) float64 array, per rank
    for i, r in enumerate(student.run(observe_parallel, t=t, part="mlp", **v)):
        forward, backward = r["forward_nbytes"], r["nbytes"] - r["forward_nbytes"]
        assert (forward, backward) == (allreduce_nbytes, allreduce_nbytes), (
            f"rank {i} sent {forward} B forward and {backward} B backward; Megatron's MLP all-reduces once each "
            f"way, {allreduce_nbytes} B per rank on the ring: g after the row-parallel layer in forward, f before the "
            "column-parallel layer in backward (f is the identity forward, g the identity backward)"
        )
