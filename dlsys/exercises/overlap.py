"""Exercise ``wfbp_iteration`` (lesson 10): the iteration time of wait-free backpropagation.

One worker, one parameter server, a chain of layers, a link without CPU overheads (a
message of n bytes occupies its sender's link for n / B and arrives ``latency_s`` after
its last byte left). Write the recurrence the clocks obey, message by message; the graded
tests hold your answer to the emulator (``dlsys.schedule``, policy "wfbp") on real layer
profiles, where communication hides behind backward only partly.
"""

from __future__ import annotations


def wfbp_iteration_s(
    forward_s: list[float], params: list[int], latency_s: float, bandwidth_Bps: float, update_s: list[float]
) -> float:
    """Seconds per iteration (steady state: from one backward's end to the next's) of WFBP.

    Layer l (0 = the input layer) takes ``forward_s[l]`` forward and ``2 * forward_s[l]``
    backward; backward runs from the last layer down, and layer l's gradient is ready when
    its backward ends. Layers with ``params[l] == 0`` send nothing.

    * Each ready gradient is pushed at once, in the order they become ready, as one message
      of ``4 * (params[l] + 1)`` bytes (float32 values and the layer's key); a push departs
      when it is ready and the worker's link is free of the previous pushes.
    * The server takes pushes as they arrive, one at a time, spends ``update_s[l]`` on each,
      and replies with the layer's new weights (a message of the same size), its replies
      also leaving one after the other on its link.
    * The next forward starts when the worker's backward is over and every reply is back.
    """
    # BEGIN SOLUTION wfbp_iteration
    ready, clock = {}, 0.0  # clock 0: backward starts
    for l in reversed(range(len(forward_s))):
        clock += 2 * forward_s[l]
        ready[l] = clock
    backward_end_s = clock
    worker_link = server_clock = server_link = last_back = 0.0
    for l in reversed(range(len(forward_s))):
        if not params[l]:
            continue
        wire_s = 4 * (params[l] + 1) / bandwidth_Bps
        depart = max(ready[l], worker_link)  # queued behind the earlier pushes
        worker_link = depart + wire_s
        server_clock = max(server_clock, depart + wire_s + latency_s) + update_s[l]
        reply = max(server_clock, server_link)
        server_link = reply + wire_s
        last_back = max(last_back, reply + wire_s + latency_s)
    return sum(forward_s) + max(backward_end_s, last_back)
    # END SOLUTION
