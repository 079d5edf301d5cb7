"""Measured against modelled memory: a data-parallel run that accounts its numpy bytes.

``ddp_memory`` trains the digits MLP or CNN with Horovod-style data parallelism (every
rank holds the whole model, one all-reduce of the flat gradient buffer per step) and
each rank records in a ``MemoryLedger`` what it holds: its parameters and gradients
(``model.params``, ``model.grads``), the optimizer's state arrays (SGD's velocity) and,
between each forward and its backward, the activations its layers keep
(``nn.activation_nbytes``). ``compare`` sets the ledger's peaks beside
``Layout(P, ranks, zero=0, optimizer="sgd", precision="fp32").bytes()``: 4 + 4 + 4 bytes
per parameter, which the measured ``nbytes`` equal exactly.
"""

from __future__ import annotations

from ..comm import LaunchResult, launch
from ..learn import nn, optim
from ..learn.task import TrainConfig, build_model, steps_per_epoch, task_of, training_batches
from ..machine.ledger import MemoryLedger
from ..machine.memory import KINDS, Layout
from ..train.data_parallel import DistributedOptimizer, broadcast_parameters


def ddp_memory_program(comm, config: TrainConfig, steps: int) -> MemoryLedger:
    """``steps`` steps of synchronous data parallelism, every allocation in the ledger."""
    ledger = MemoryLedger(comm.rank, lambda: comm.clock)
    model = build_model(config)
    ledger.alloc("parameters", model.params.nbytes, "model.params")
    ledger.alloc("gradients", model.grads.nbytes, "model.grads")
    sgd = optim.SGD(model.params, model.grads, config.lr, config.momentum)
    for name in sgd.state_names:
        ledger.alloc("optimizer", getattr(sgd, name).nbytes, f"sgd.{name}")
    opt = DistributedOptimizer(sgd, comm)
    broadcast_parameters(comm, model.params)
    task = task_of(config)
    batches = training_batches(comm, config, task, steps_per_epoch(len(task.y_train), comm.size, config.batch_size))
    for (step, X, y), _ in zip(batches, range(steps)):
        forward_flops = sum(model.flops(len(X)))  # backward: twice the forward (dlsys.learn.task.gradient)
        _, dlogits = nn.softmax_cross_entropy(model.forward(X), y)
        comm.compute(flops=forward_flops, label="forward")
        ledger.alloc("activations", nn.activation_nbytes(model), f"forward {step}")
        model.backward(dlogits)
        comm.compute(flops=2 * forward_flops, label="backward")
        ledger.free(f"forward {step}")
        opt.step()
    return ledger


def ddp_memory(model: str = "mlp", ranks: int = 4, steps: int = 3, batch_size: int = 32,
               backend: str = "threads") -> LaunchResult:
    """The run of ``steps`` data-parallel steps on digits: ``values`` are the ranks' ledgers;
    ``trace.to_chrome(memory=values)`` draws their timelines beside the spans."""
    config = TrainConfig(model=model, batch_size=batch_size)
    return launch(ddp_memory_program, ranks, backend, args=(config, steps))


def compare(ledger: MemoryLedger, params: int, ranks: int) -> list[dict]:
    """Kind by kind: the ledger's peak against the closed form (fp32 SGD with momentum, DDP)."""
    modelled = Layout(params, ranks, zero=0, optimizer="sgd", precision="fp32").bytes()
    return [{"kind": kind, "measured_bytes": ledger.peak_by_kind[kind], "model_bytes": modelled[kind]}
            for kind in KINDS]
