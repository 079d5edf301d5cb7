"""Wait-free backpropagation (Zhang et al. 2017, "Poseidon: an efficient communication
architecture for distributed deep learning on GPU clusters", USENIX ATC): each layer's
gradient is sent as soon as its backward ends, so communication overlaps the backward of
the layers below; the next forward still waits for every layer. For a chain of layers
whose sends queue on one link (sizes s_l, wire time w_l = alpha + s_l / B):
    T = max over l of (ready_l + sum of w_k for the layers k sent after and including l ... )
the last send ends at max_l (r_l + sum_{k <= l} w_k), r_l the ready time of layer l."""

from .policy import Policy


class WFBP(Policy):
    name = "wfbp"
    paper = "Zhang et al. 2017, Poseidon (USENIX ATC)"
    colour = "#4c78a8"
