"""The machine, modelled: pure functions and presets, no communication, no I/O.

``net`` (links and nodes, sizes, closed-form helpers), ``topology`` (which link joins two
nodes), ``netstack`` (a message's stages through TCP or RDMA, message libraries),
``storage`` (storage devices and the data loader's pipeline in virtual time), ``datapath``
(the bytes a real all-reduce moves through memory), ``profiles`` (layer profiles of the
classic CNNs). The bottom layer: everything above may import it.
"""
