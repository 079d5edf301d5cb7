"""Exercise ``token_ring`` (lesson 01): your first rank program, with send and recv only.

Run it: ``dlsys.launch(token_ring, 4, "threads", args=(np.zeros(3),)).values``.
"""

from __future__ import annotations

import numpy as np


def token_ring(comm, token: np.ndarray) -> np.ndarray:
    """Pass ``token`` once around the ring 0 -> 1 -> ... -> p-1 -> 0 (p = comm.size >= 2).

    Every rank adds 1 to the token before it sends it to its right neighbour
    ``(rank + 1) % p``. Rank 0 starts the lap: it sends ``token + 1`` and then receives the
    token back from its left neighbour ``(rank - 1) % p``. Every other rank first receives
    from its left neighbour, then passes the token on.

    Returns the array this rank received: ``token + r`` on rank r > 0 and ``token + p`` on
    rank 0 (one full lap). The lap is p messages one after the other: p (alpha + n beta).
    """
    # BEGIN SOLUTION token_ring
    right, left = (comm.rank + 1) % comm.size, (comm.rank - 1) % comm.size
    if comm.rank == 0:
        comm.send(token + 1, right, label="token")
        return comm.recv(source=left)
    received = comm.recv(source=left)
    comm.send(received + 1, right, label="token")
    return received
    # END SOLUTION
