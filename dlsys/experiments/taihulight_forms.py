"""The PS designs' iteration on one link in closed form (dlsys.experiments.taihulight): rank
0's clock as the emulator's rules give it, posted and taken in the rank code's order
(``ps_rank0_s`` for the direct PS; ``replay`` of the MPI-built PS's binomial trees,
``ps_mpi_rank0_s``). ``taihulight.design_closed_form_s`` splits them like ``run_design``."""

from __future__ import annotations


def ps_rank0_s(p: int, sizes: list, forward_s: list, backward_s: list, link, copy_s: float, update_s: float) -> float:
    """Rank 0's clock at the end of a PS iteration (dlsys.train.caffe.ps_iteration): DESIGN.md's
    virtual-time rules applied in the order the rank code posts and takes messages, with
    layers j of n_j bytes, forward f_j and backward b_j seconds, N = sum n_j, w(n) = n / B:

        rank 0 sends W to k = 1..p-1:  d_k = max(k o_s(N) + c, d_{k-1} + w(N)),  a_k = d_k + L + w(N)
        worker k, layer j (last first): t_k += b_j + o_s(n_j);  D_kj = max(t_k, D_k,j+1 + w(n_j))
                                        (t_k starts at a_k + o_r(N) + c + sum f)
        rank 0 takes layer j from k = 1..p-1 in order: A = max(D_kj + L + w(n_j), A_prev + w(n_j)),
                                        t_0 = max(t_0, A) + o_r(n_j)   (after its own b_j)
        then the update.

    c is a packing copy (0 if contiguous). Exact: the recurrence is the emulator's own
    order of events, the way lesson 10 writes WFBP's; the server's link makes it grow
    about as (p-1)(N + sum n_j) / B once the compute can no longer hide it."""
    total = sum(sizes)
    t0, egress, departs = copy_s, 0.0, {}
    for worker in range(1, p):
        t0 += link.send_overhead_s(total)
        depart = max(t0, egress)
        egress = depart + link.wire_s(total)
        t = depart + link.latency_s + link.wire_s(total) + link.recv_overhead_s(total) + copy_s + sum(forward_s)
        worker_egress = 0.0
        for j in reversed(range(len(sizes))):
            t += backward_s[j] + link.send_overhead_s(sizes[j])
            departs[worker, j] = max(t, worker_egress)
            worker_egress = departs[worker, j] + link.wire_s(sizes[j])
    t0 += sum(forward_s)
    ingress = 0.0
    for j in reversed(range(len(sizes))):
        t0 += backward_s[j]
        for worker in range(1, p):
            ingress = max(departs[worker, j] + link.latency_s + link.wire_s(sizes[j]), ingress + link.wire_s(sizes[j]))
            t0 = max(t0, ingress) + link.recv_overhead_s(sizes[j])
    return t0 + update_s


def replay(programs: list[list[tuple]], link) -> list[float]:
    """Every rank's clock at the end of ``programs`` (per rank, in program order: ("compute",
    seconds), ("send", dst, nbytes), ("recv", src, nbytes)) under DESIGN.md's rules on one
    link: a send pays o_s(n) and departs at max(t, egress free), holding the egress for
    w(n) = n / B; a receive takes the oldest message from its source, arriving at
    A = max(depart + latency + w(n), ingress free + w(n)), and t = max(t, A) + o_r(n).
    Sends are buffered, so the ranks advance in turn until each waits on a message not yet sent."""
    p = len(programs)
    clock, egress, ingress, position = [0.0] * p, [0.0] * p, [0.0] * p, [0] * p
    departures: dict = {}  # (src, dst) -> departure times not yet received
    while any(position[r] < len(programs[r]) for r in range(p)):
        for r in range(p):
            while position[r] < len(programs[r]):
                op = programs[r][position[r]]
                if op[0] == "compute":
                    clock[r] += op[1]
                elif op[0] == "send":
                    clock[r] += link.send_overhead_s(op[2])
                    depart = max(clock[r], egress[r])
                    egress[r] = depart + link.wire_s(op[2])
                    departures.setdefault((r, op[1]), []).append(depart)
                elif departures.get((op[1], r)):
                    depart = departures[op[1], r].pop(0)
                    ingress[r] = max(depart + link.latency_s + link.wire_s(op[2]), ingress[r] + link.wire_s(op[2]))
                    clock[r] = max(clock[r], ingress[r]) + link.recv_overhead_s(op[2])
                else:
                    break  # waits for a message not yet sent
                position[r] += 1
    return clock


def binomial_tree(p: int, v: int, up: bool) -> list[tuple]:
    """Rank v's messages in a binomial tree rooted at 0, as dlsys.collectives.trees orders
    them: ("recv" | "send", peer, blocks), blocks counting the per-rank parts a message
    carries (a gather's subtree; 1 for broadcast and reduce). ``up``: towards the root."""
    if up:  # reduce, gather: receive from v + m for each m below v's lowest set bit, then send to v - low
        ops, mask = [], 1
        while mask < p:
            if v & mask:
                return ops + [("send", v - mask, min(mask, p - v))]
            if v + mask < p:
                ops.append(("recv", v + mask, min(mask, p - v - mask)))
            mask <<= 1
        return ops
    mask = 1  # broadcast: receive from the parent, then send to v + m, largest subtree first
    while mask < p and not v & mask:
        mask <<= 1
    ops = [("recv", v - mask, 1)] if v else []
    mask >>= 1
    while mask:
        if v + mask < p:
            ops.append(("send", v + mask, 1))
        mask >>= 1
    return ops


def ps_mpi_rank0_s(
    p: int, sizes: list, forward_s: list, backward_s: list, link, copy_s: float, update_s: float, aggregate: str
) -> float:
    """Rank 0's clock at the end of an MPI-built PS iteration (dlsys.train.caffe.ps_mpi_iteration
    with binomial trees, the TaihuLight MPI's): ``replay`` of its rank programs,

        rank 0: pack W (c);  everyone: binomial broadcast of W (N = sum n_j bytes);
        workers: unpack W (c);  everyone: forward (sum f_j);
        for j = L-1 .. 0: backward b_j, then a binomial reduce of n_j bytes (``aggregate``
        "reduce") or gather (a subtree of k ranks sends k n_j bytes) to rank 0;
        rank 0: the update.

    Exact: the replay is the emulator's rules in the rank code's order of messages. Pure
    communication (no compute) and powers of two give the textbook sums: lg p (alpha + N beta)
    for the broadcast, per layer lg p (alpha + n_j beta) (reduce) or lg p alpha + (p-1) n_j beta
    (gather), less what consecutive trees overlap."""
    total, programs = sum(sizes), []
    for v in range(p):
        ops = [("compute", copy_s)] if v == 0 else []
        ops += [(kind, peer, total) for kind, peer, _ in binomial_tree(p, v, up=False)]
        ops += [("compute", (copy_s if v else 0.0) + sum(forward_s))]
        for j in reversed(range(len(sizes))):
            ops.append(("compute", backward_s[j]))
            ops += [
                (kind, peer, sizes[j] * (blocks if aggregate == "gather" else 1))
                for kind, peer, blocks in binomial_tree(p, v, up=True)
            ]
        programs.append(ops + ([("compute", update_s)] if v == 0 else []))
    return replay(programs, link)[0]
