"""The learning, without communication: pure numpy models and their training task.

``nn`` (layers, losses, gradients; a small transformer), ``optim`` (SGD, Adam, LARS, LAMB,
schedules), ``data`` (the datasets), ``loader`` (a real multi-process data loader),
``landscape`` (loss along a line, sharpness), ``task`` (the digits task every training
strategy runs: the model, a gradient, accuracy, the training config) and ``sequence`` (a
generated sequence task for the transformer: reverse a string of digits).
"""
