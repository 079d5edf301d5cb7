"""One entry per (collective, algorithm): its rank function, closed form, LaTeX, citation
and colour. Dispatch (dlsys.collectives), ``check_algorithm``, the CLI's choices, the
tests and the figures all read REGISTRY, so adding an algorithm is one file and one entry.

Closed forms (Hockney's alpha-beta-gamma model; Thakur, Rabenseifner & Gropp 2005) are
functions ``cost(p, n, m, a, b, g, L)`` of p ranks, n bytes (the whole buffer; for gather
and allgather the whole result), m(k) the bytes of the *largest* of k blocks of n
(np.array_split: ceil(n/k) elements), a = alpha, b = beta, g = gamma (0 unless reductions
are charged) and L = ceil(lg p). With m(k) = n/k a form is the textbook one. With the real m
it is exact wherever ``exact`` says, at every n. In a ring the largest block (block 0)
travels the whole ring, each hop waiting for the one before: that chain alone costs the
form with m, and smaller other blocks cannot slow any step, so it is exact. Where ``uneven`` is
"bound", blocks of different sizes meet in one step (a tree's subtrees, a halving's
halves) and the form with the largest block is an upper bound, the one with the smallest
a lower bound (every message time grows with its size); both are exact when p divides n.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

from . import exchange, halving_doubling, hierarchical, ring, ring_fast, trees

EVERY_P, POWERS_OF_TWO = "every p", "powers of two"


def lg(p: int) -> int:
    """ceil(lg p)."""
    return (p - 1).bit_length()


def p2(p: int) -> int:
    """The largest power of two <= p: the group left after MPICH's fold."""
    return 1 << (p.bit_length() - 1)


def fold(p: int, n: float, a: float, b: float, g: float) -> float:
    """What MPICH's fold adds to an all-reduce (0 at a power of two): the odd rank of each of
    the first 2 (p - p2) pairs hands x to the even one, which reduces it (alpha + n beta
    + n gamma), and gets the result back at the end (alpha + n beta).

    Rabenseifner's partners (p2/2 .. 1, then 1 .. p2/2) XOR to 0, so a folded rank's result
    waits on a chain of every step that starts at its own late start: the group costs its
    power-of-two time after the fold, exactly (and no more: starting every rank late cannot
    be faster). Recursive doubling's partners XOR to p2 - 1: the chain starts at the rank
    v ^ (p2 - 1), which is late for some folded v only if 2 (p - p2) > p2; elsewhere the
    form is an upper bound."""
    return 0.0 if p == p2(p) else 2 * (a + n * b) + n * g


def broadcast_cost(p: int, n: float, m, a: float, b: float, g: float, L: int, o, w) -> float:
    """Binomial broadcast: L (a + n b) at a power of two; else (L - 1)(a + n b) + max(o(n), w(n)).

    A rank that got x at time r sends to its children largest subtree first; its k-th send
    leaves at r + o + (k - 1) max(o, w) (its CPU overhead o(n) per send, or its egress busy
    w(n) = n / B per message, whichever is longer) and is in at r + T + (k - 1) max(o, w),
    T = a + n b. With p = q + e, q = 2^(L-1) < p: the root's first child q heads the
    e = p - q ranks q..p-1 (a broadcast on e ranks, one step late), its second child q/2 a
    full tree of q/2 ranks, lg(q/2) steps deep, one send late: T + max(o, w) + (L - 2) T.
    Every other child is a shallower tree sent later; the first child's tree, by the same
    argument on e <= q, ends by T + (L - 2) T + max(o, w) or T + (lg e) T, no later. At a
    power of two the first child's subtree is the full tree: L T."""
    return L * (a + n * b) if p & (p - 1) == 0 else (L - 1) * (a + n * b) + max(o(n), w(n))


def reduce_cost(p: int, n: float, m, a: float, b: float, g: float, L: int, o, w) -> float:
    """Binomial reduce: L (a + n b + n g) at a power of two; else (L - 1)(a + n b + n g)
    + max(o(n) + n g, w(n)).

    The broadcast reversed, with the receiver's costs: a parent takes its children in, the
    smallest subtree first, each arrival then o(n) + n g. A full subtree of 2^j ranks is ready
    at j (T + n g). On p = q + e the root has had its q/2 subtree in at (L - 1)(T + n g); the
    last message, from q (heading the other e ranks), arrives one wire time w(n) after the
    one before it (the root's ingress) or after the root is free, whichever is later: the
    root ends at (L - 1)(T + n g) + max(o + n g, w)."""
    step = a + n * b + n * g
    return L * step if p & (p - 1) == 0 else (L - 1) * step + max(o(n) + n * g, w(n))


def hierarchical_cost(p, n, m, s, a, b, a_up, b_up, g) -> float:
    """Hierarchical all-reduce on supernodes of s ranks, k = ceil(p / s) of them, with
    (a, b) inside a supernode and (a_up, b_up) across: a binomial reduce and a binomial
    broadcast inside, a ring among the k leaders between them:
    2 lg s (a + n b) + lg s n g + 2 (k-1) (a_up + m(k) b_up) + (k-1) m(k) g.
    Exact when s is a power of two and divides p (every supernode full and alike)."""
    k = -(-p // s)
    return 2 * lg(s) * (a + n * b) + lg(s) * n * g + 2 * (k - 1) * (a_up + m(k) * b_up) + (k - 1) * m(k) * g


# blocks(p, k): how many blocks an algorithm cuts one rank's buffer into, on p ranks in k
# supernodes. A scaled run picks real lengths these divide, so every real block stands for
# exactly its logical one (dlsys.experiments.budget.plan_buffers, its ``unit``).
def whole(p: int, k: int) -> int:
    return 1


def per_rank(p: int, k: int) -> int:
    return p


def per_rank_after_fold(p: int, k: int) -> int:
    return p2(p)


def per_supernode(p: int, k: int) -> int:
    return k


def bruck_cost(p: int, n: float, m, a: float, b: float, g: float, L: int, o, w) -> float:
    """Bruck's all-to-all: step k sends c_k blocks (exchange.bruck_counts), sum_k (a + c_k m(p) b);
    L (a + n/2 b) at powers of two. Exact at every p for even blocks; with uneven ones a
    message packs blocks of different sizes, so the form with the largest is an upper bound."""
    return sum(a + c * m(p) * b for c in exchange.bruck_counts(p))


def log_steps_cost(p: int, n: float, m, a: float, b: float, g: float, L: int, o, w) -> float:
    """L a + (p - 1) m(p) b: L steps, every rank's block on the wire once on the way
    (binomial scatter and gather, recursive-doubling all-gather)."""
    return L * a + (p - 1) * m(p) * b


def p_minus_1_steps_cost(p: int, n: float, m, a: float, b: float, g: float, L: int, o, w) -> float:
    """(p - 1)(a + m(p) b): p - 1 steps of one block each (ring all-gather, pairwise all-to-all)."""
    return (p - 1) * (a + m(p) * b)


def rabenseifner_cost(p: int, n: float, m, a: float, b: float, g: float, L: int, o, w) -> float:
    """Rabenseifner on the p2 ranks left after the fold: a recursive-halving reduce-scatter
    then a recursive-doubling all-gather, 2 lg p2 a + 2 (p2 - 1) m(p2) b + (p2 - 1) m(p2) g."""
    q = p2(p)
    return fold(p, n, a, b, g) + 2 * lg(q) * a + 2 * (q - 1) * m(q) * b + (q - 1) * m(q) * g


def reduce_broadcast_cost(p: int, n: float, m, a: float, b: float, g: float, L: int, o, w) -> float:
    """A binomial reduce then a binomial broadcast (reduce_cost + broadcast_cost)."""
    return reduce_cost(p, n, m, a, b, g, L, o, w) + broadcast_cost(p, n, m, a, b, g, L, o, w)


THAKUR = "Thakur, Rabenseifner & Gropp 2005, Optimization of collective communication operations in MPICH"
# the binomial trees' forms at a power of two, and where p is not one (broadcast_cost)
TREE_NOTE = r" \quad (p \ne 2^L\text{: a tree's last step is } \max(o, \tfrac{n}{B}))"
TREE_LATEX = r"L\,(\alpha + n\beta)" + TREE_NOTE
PATARASUK = "Patarasuk & Yuan 2009, Bandwidth optimal all-reduce algorithms for clusters of workstations"


@dataclass(frozen=True)
class Algorithm:
    """One algorithm of one collective.

    ``exact``: the rank counts where the emulation equals ``cost`` ("every p" or "powers
    of two"; elsewhere the form is an estimate with L = ceil(lg p), where the all-reduces
    fold to a power of two first). ``uneven``: "exact" (at every length) or "bound" (module
    docstring). ``fallback``: the algorithm that runs instead when p is not a power of two.
    ``fast``: runs instead when the caller passes ``out=``; same messages, same trace.
    ``lean``: runs instead when the caller passes ``fast=True`` (big emulations); same
    messages, same trace, fewer Python calls per message. ``tiered``: the closed form on a
    two-level tree, ``tiered(p, n, m, s, a, b, a_up, b_up, g)`` (supernodes of s ranks;
    ``cost`` is its flat case), for the algorithms that know the topology. ``variant_of``:
    the algorithm whose messages it sends in another order (same closed form on one link;
    the cost model shows only the original). ``blocks(p, k)``:
    the blocks it cuts a buffer into (above ``whole``); ``block_scales``: it only ever sends
    whole blocks, so each real block may stand for its own number of elements (a ring).
    ``shape``: how its ranks are drawn so its messages run along the lines of the idea
    (dlsys.viz.layouts.rank_positions): "circle" (a ring), "tree" (a binomial tree under rank
    0), "hypercube" (partners differ in one bit) or "two-level" (supernodes, leaders above).
    """

    collective: str
    name: str
    run: Callable  # the rank function (reading path); its arguments depend on the collective
    cost: Callable  # closed form cost(p, n, m, a, b, g, L) in seconds (module docstring)
    latex: str  # the textbook form (m = n/p) without gamma, for figures
    citation: str
    color: str  # its colour in every figure
    blocks: Callable  # blocks(p, k): the blocks of a buffer on p ranks in k supernodes
    exact: str = POWERS_OF_TWO
    uneven: str = "exact"
    fallback: str | None = None
    fast: Callable | None = None
    lean: Callable | None = None
    tiered: Callable | None = None
    block_scales: bool = False
    variant_of: str | None = None
    shape: str = "circle"


def binomial_tree(collective: str, run: Callable, cost: Callable) -> Algorithm:
    """The binomial broadcast or reduce: all but the rank function and closed form are shared."""
    return Algorithm(
        collective, "binomial", run, cost, TREE_LATEX, THAKUR, "#9467BD", whole, exact=EVERY_P, shape="tree"
    )


REGISTRY: dict[tuple[str, str], Algorithm] = {
    (a.collective, a.name): a
    for a in [
        Algorithm(
            "barrier",
            "dissemination",
            trees.barrier_dissemination,
            lambda p, n, m, a, b, g, L, o, w: L * a,
            r"L\,\alpha",
            "Hensgen, Finkel & Manber 1988, Two algorithms for barrier synchronization",
            "#8C564B",
            whole,
            exact=EVERY_P,
        ),
        binomial_tree("broadcast", trees.broadcast_binomial, broadcast_cost),
        Algorithm(
            "broadcast",
            "scatter_allgather",
            ring.broadcast_scatter_allgather,
            lambda p, n, m, a, b, g, L, o, w: (L + p - 1) * a + 2 * (p - 1) * m(p) * b,
            r"(L + p - 1)\,\alpha + 2\,\tfrac{p-1}{p}\,n\beta",
            "van de Geijn: Barnett et al. 1994, Interprocessor collective communication library; " + THAKUR,
            "#17BECF",
            per_rank,
            uneven="bound",
        ),
        Algorithm(
            "scatter",
            "binomial",
            trees.scatter_binomial,
            log_steps_cost,
            r"L\,\alpha + \tfrac{p-1}{p}\,n\beta",
            THAKUR,
            "#9467BD",
            per_rank,
            uneven="bound",
            shape="tree",
        ),
        Algorithm(
            "gather",
            "binomial",
            trees.gather_binomial,
            log_steps_cost,
            r"L\,\alpha + \tfrac{p-1}{p}\,n\beta \quad (n = p \times \text{size})",
            THAKUR,
            "#9467BD",
            whole,
            shape="tree",
        ),
        Algorithm(
            "allgather",
            "ring",
            ring.allgather_ring,
            p_minus_1_steps_cost,
            r"(p-1)\,(\alpha + \tfrac{n}{p}\beta) \quad (n = p \times \text{size})",
            PATARASUK,
            "#1F77B4",
            whole,
            exact=EVERY_P,
        ),
        Algorithm(
            "allgather",
            "recursive_doubling",
            halving_doubling.allgather_recursive_doubling,
            log_steps_cost,
            r"L\,\alpha + \tfrac{p-1}{p}\,n\beta \quad (n = p \times \text{size})",
            THAKUR,
            "#FF7F0E",
            whole,
            fallback="ring",
            shape="hypercube",
        ),
        binomial_tree("reduce", trees.reduce_binomial, reduce_cost),
        Algorithm(
            "reduce_scatter",
            "ring",
            ring.reduce_scatter_ring,
            lambda p, n, m, a, b, g, L, o, w: (p - 1) * (a + m(p) * (b + g)),
            r"(p-1)\,(\alpha + \tfrac{n}{p}\beta)",
            PATARASUK,
            "#1F77B4",
            per_rank,
            exact=EVERY_P,
            block_scales=True,
        ),
        Algorithm(
            "reduce_scatter",
            "recursive_halving",
            halving_doubling.reduce_scatter_recursive_halving,
            lambda p, n, m, a, b, g, L, o, w: L * a + (p - 1) * m(p) * (b + g),
            r"L\,\alpha + \tfrac{p-1}{p}\,n\beta",
            THAKUR,
            "#2CA02C",
            per_rank,
            uneven="bound",
            fallback="ring",
            shape="hypercube",
        ),
        Algorithm(
            "allreduce",
            "ring",
            ring.allreduce_ring,
            lambda p, n, m, a, b, g, L, o, w: 2 * (p - 1) * (a + m(p) * b) + (p - 1) * m(p) * g,
            r"2(p-1)\,(\alpha + \tfrac{n}{p}\beta)",
            PATARASUK + "; Baidu 2017, ring all-reduce",
            "#1F77B4",
            per_rank,
            exact=EVERY_P,
            fast=ring_fast.allreduce_ring_into,
            lean=ring_fast.allreduce_ring_lean,
            block_scales=True,
        ),
        Algorithm(
            "allreduce",
            "recursive_doubling",
            halving_doubling.allreduce_recursive_doubling,
            lambda p, n, m, a, b, g, L, o, w: fold(p, n, a, b, g) + lg(p2(p)) * (a + n * b + n * g),
            r"L\,(\alpha + n\beta)",
            THAKUR,
            "#FF7F0E",
            whole,
            shape="hypercube",
        ),  # other p: an upper bound (see fold)
        Algorithm(
            "allreduce",
            "rabenseifner",
            halving_doubling.allreduce_rabenseifner,
            rabenseifner_cost,
            r"2L\,\alpha + 2\,\tfrac{p-1}{p}\,n\beta",
            "Rabenseifner 2004, Optimization of collective reduction operations; " + THAKUR,
            "#2CA02C",
            per_rank_after_fold,
            exact=EVERY_P,
            uneven="bound",
            shape="hypercube",
        ),
        Algorithm(
            "allreduce",
            "rabenseifner_distance_doubling",
            halving_doubling.allreduce_rabenseifner_distance_doubling,
            rabenseifner_cost,
            r"2L\,\alpha + 2\,\tfrac{p-1}{p}\,n\beta",
            "Rabenseifner in MPICH's step order, distance 1 first (MPICH v3.2 src/mpi/coll/allreduce.c lines "
            "462-573; Open MPI coll_base_allreduce.c, redscat_allgather); " + THAKUR,
            "#98DF8A",
            per_rank_after_fold,
            exact=EVERY_P,
            uneven="bound",
            variant_of="rabenseifner",
            shape="hypercube",
        ),
        Algorithm(
            "allreduce",
            "reduce_broadcast",
            trees.allreduce_reduce_broadcast,
            reduce_broadcast_cost,
            r"2L\,(\alpha + n\beta)" + TREE_NOTE,
            THAKUR,
            "#D62728",
            whole,
            exact=EVERY_P,
            shape="tree",
        ),
        Algorithm(
            "allreduce",
            "hierarchical",
            hierarchical.allreduce_hierarchical,
            reduce_broadcast_cost,
            r"2\lg s\,(\alpha + n\beta) + 2(k-1)\,(\alpha_{up} + \tfrac{n}{k}\beta_{up})",
            "Karonis et al. 2000, Exploiting hierarchy in parallel computer networks to optimize collective "
            "operation performance; " + PATARASUK,
            "#E377C2",
            per_supernode,
            exact=EVERY_P,
            tiered=hierarchical_cost,
            shape="two-level",
        ),
        Algorithm(
            "alltoall",
            "pairwise",
            exchange.alltoall_pairwise,
            p_minus_1_steps_cost,
            r"(p-1)\,(\alpha + \tfrac{n}{p}\beta)",
            "MPICH src/mpi/coll/alltoall/alltoall_intra_pairwise.c (MPIR_Alltoall_intra_pairwise); " + THAKUR,
            "#1F77B4",
            per_rank,
            exact=EVERY_P,
            uneven="bound",
        ),
        Algorithm(
            "alltoall",
            "bruck",
            exchange.alltoall_bruck,
            bruck_cost,
            r"L\,(\alpha + \tfrac{n}{2}\beta)",
            "Bruck, Ho, Kipnis, Upfal & Weathersby 1997, Efficient algorithms for all-to-all communications in "
            "multiport message-passing systems (IEEE TPDS 8(11)); MPICH src/mpi/coll/alltoall/"
            "alltoall_intra_brucks.c; " + THAKUR,
            "#FF7F0E",
            per_rank,
            exact=EVERY_P,
            uneven="bound",
        ),
    ]
}

# collective -> its algorithms, in registry order (the first is the default)
ALGORITHMS: dict[str, tuple[str, ...]] = {
    collective: tuple(name for c, name in REGISTRY if c == collective)
    for collective in dict.fromkeys(c for c, _ in REGISTRY)
}
