"""The prepared demos: a page set up for one point of a lecture, as a link. Home lists them
(with presenter mode on when it is on), docs/course.md's "Prepared links for the slides"
table is this list (tests/app/test_app.py checks both ways), and each link opens its page with
exactly its values."""

from typing import NamedTuple


class Demo(NamedTuple):
    week: int  # of docs/course.md's sequence
    what: str  # what it shows, as a teacher would announce it
    link: str  # relative to the app's address: "/<page>?<its widgets' URL keys>"


DEMOS = [
    Demo(
        2,
        "a binomial broadcast on 16 ranks",
        "/collectives?coll_collective=broadcast&coll_algorithm_broadcast=binomial&coll_ranks=16&coll_view=Messages",
    ),
    Demo(3, "the ring, step by step, 8 ranks", "/collectives?coll_ranks=8&coll_view=Ring+step+by+step"),
    Demo(
        4, "ring, 16 ranks, 64 MiB, TCP vs RDMA", "/cost_model?cost_ranks=16&cost_size=67108864&cost_view=TCP+vs+RDMA"
    ),
    Demo(4, "where recursive doubling stops winning, 16 ranks", "/cost_model?cost_ranks=16&cost_view=Against+size"),
    Demo(
        5,
        "a parameter server against the ring, 16 workers on 1 GbE",
        "/ps_vs_ring?ps_workers=16&ps_link=tcp-1gbe&ps_view=Side+by+side",
    ),
    Demo(
        5,
        "a straggler 8 times slower under BSP, SSP and ASP",
        "/training?train_straggler=8.0&train_view=Who+waits%3A+BSP%2C+SSP%2C+ASP",
    ),
    Demo(
        8,
        "top-k at 1 %, iteration time on 1 GbE and RDMA",
        "/compression?cmp_method=topk&cmp_ratio=0.01&cmp_view=Iteration+time",
    ),
    Demo(
        13,
        "recursive doubling on an oversubscribed two-level tree: the uplinks hot at distance 4",
        "/collectives?coll_ranks=8&coll_size=16777216&coll_link=rdma-edr&coll_view=Link+load"
        "&coll_load_pattern=recursive_doubling&coll_load_fabric=two-level",
    ),
]


def presenting(link: str) -> str:
    """The link with presenter mode on."""
    return f"{link}&presenter=true"
