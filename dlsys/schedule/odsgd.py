"""OD-SGD, one-step-delay SGD (Xu et al. 2020, "OD-SGD: one-step delay stochastic gradient
descent for distributed training", ACM TACO): the worker does not wait for the global
update of the step it just finished. It starts the next forward at once on locally
updated weights, w_{t+1} = W_t - lr g_t, where W_t is the newest global weights it has
(the parameter server's, one step behind) and g_t its own gradient; the global update
of step t arrives during step t+1 and is used at step t+2. Sends as WFBP does; unlike the
other policies it changes the numbers (the weights a forward sees), not only the time."""

from .wfbp import WFBP


class ODSGD(WFBP):
    name = "odsgd"
    paper = "Xu et al. 2020, OD-SGD (ACM TACO)"
    colour = "#b279a2"
    forward = "stale"
