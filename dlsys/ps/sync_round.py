"""The simplest parameter server: one server, one synchronous round of plain averaging."""


def ps_round(comm, grad=None):
    """One synchronous parameter-server round, rank 0 the server: every worker (ranks
    1..W) pushes its gradient ``grad``, the server averages the W gradients and sends the
    mean back to every worker. Returns the mean on every rank (``grad`` is unused on rank 0).

    The server's ingress carries W n bytes and its egress another W n, where a ring
    all-reduce puts 2 (W-1)/W n on every link: one round costs
    2 (alpha + n beta) + 2 (W-1) n / B (``experiments.ps_closed_form_s``).
    """
    workers = comm.size - 1
    if comm.rank == 0:
        total = sum(comm.recv(source=w, label="push gradient") for w in range(1, workers + 1))
        mean = total / workers
        for w in range(1, workers + 1):
            comm.send(mean, w, label="pull mean")
        return mean
    comm.send(grad, 0, label="push gradient")
    return comm.recv(source=0, label="pull mean")
