"""What travels between workers and servers: a request (kind, then keys), the pushed
values, a pull's reply (the worker's clock, then the values) and, with several servers,
server 0's order of requests."""

PULL, PUSH, LEAVE = 0, 1, 2  # request kinds
KINDS = ("pull", "push", "leave")  # their labels
REQUEST, DATA, REPLY, ORDER, GATHER = 21, 22, 23, 24, 25  # message tags
STOP = -1.0  # the clock in a reply that tells the worker training is over
