"""The learning, without communication: pure numpy models and their training task.

``nn`` (layers, losses, gradients), ``optim`` (SGD, LARS, LAMB, schedules), ``data``
(the datasets), ``loader`` (a real multi-process data loader), ``landscape`` (loss along a
line, sharpness) and ``task`` (the digits task every training strategy runs: the model,
a gradient, accuracy, the training config).
"""
