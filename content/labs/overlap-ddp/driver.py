"""Public driver for overlap-ddp: the training loop every rank runs around your code.

Not secret: read it to see exactly what the grader does. Each rank builds the same model and
``torch.optim.SGD`` (momentum) from the seed it is given, wraps the model in your
``OverlappingDDP(model, bucket_cap_bytes)`` and, each step: clears the gradients, runs the forward
pass and ``loss.backward()`` on its equal shard of the global batch, calls your ``finish()`` and
steps the optimizer. What counts is judged outside your code: the gradients and parameters
``train`` returns, against single-process training on the whole global batch, and the bytes each
rank sends to the others, counted by the kernel.

For the overlap feedback (inside your process, so no points) it watches *when* your all-reduces
are issued, wrapping nothing: right after your constructor it registers its own
post-accumulate-grad hook on every parameter, which runs right after yours (hooks run in the order
they were registered) and reads how many collectives this rank has issued (the process groups'
sequence numbers). And it checks that your hooks do not wait for their all-reduces: the ranks start
each step together (through the group's key-value store, which sends nothing on the gloo
connections), and rank 0 holds its backward pass at its first gradient until every other rank has
finished its own. An all-reduce issued with ``async_op=True`` lets them finish (it completes once
rank 0 joins in); one that blocks in a hook never can, and rank 0 says so after ``HOLD_S`` seconds.
"""

from __future__ import annotations

import time
from typing import Any

import torch
import torch.distributed as dist
import torch.nn.functional as F
from data_parallel import gradients, require_grads, shard
from mlp import build_model, build_optimizer, make_batch


def issued() -> int:
    """How many collectives this rank has issued so far, on every process group it belongs to.

    Every collective (``all_reduce`` with or without ``async_op``, coalesced or not, on the
    default group or on a new one) advances its group's sequence number when it is issued,
    in the calling thread; reading it changes nothing.
    """
    from torch.distributed import distributed_c10d as c10d

    total = 0
    for group in list(c10d._world.pg_map):
        try:
            total += int(group._get_sequence_number_for_group())  # type: ignore[attr-defined]  # in torch 2.13, not its stubs
        except RuntimeError:  # a group this rank is not part of
            continue
    return total


HOLD_S = 2.0  # how long rank 0 waits for the other ranks' backward passes (a blocked one never ends)


def _store() -> Any:
    from torch.distributed import distributed_c10d as c10d

    return c10d._get_default_store()


def _arrived(store: Any, keys: list[str], timeout_s: float, waiting: str = "") -> bool:
    """Whether every key was set in ``store`` within ``timeout_s`` seconds.

    Polled (the store's own ``wait`` rounds its timeout up to whole seconds). With ``waiting``, it
    prints that every 0.4 s: ranks that all wait in silence look like a deadlock to the grader.
    """
    started = time.monotonic()
    said = 0
    while not store.check(keys):
        waited = time.monotonic() - started
        if waited > timeout_s:
            return False
        if waiting and waited > 0.4 * (said + 1):
            said += 1
            print(f"{waiting} ({waited:.1f} s)", flush=True)
        time.sleep(0.0005)
    return True


def _hold(store: Any, tag: str, step: int, world_size: int) -> list[int]:
    """On rank 0: wait until every other rank has finished its backward pass; those that did not, in time."""
    keys = {r: f"{tag}/backward/{step}/{r}" for r in range(1, world_size)}
    note = f"driver: rank 0 holds its backward in step {step} until ranks {list(keys)} have finished theirs"
    if _arrived(store, list(keys.values()), HOLD_S, note):
        return []
    return [r for r, key in keys.items() if not store.check([key])]


def train(submission: Any, inputs: dict[str, Any]) -> dict[str, Any]:
    """Data-parallel training with the student's ``OverlappingDDP``; returns what the judge compares.

    ``grads``: every parameter's ``.grad`` after ``finish()`` in the first step.
    ``params``: every parameter after ``inputs["steps"]`` optimizer steps.
    ``timeline``: per step, the parameters in the order their gradients became ready
    (``order``), the collectives this rank had issued since the step began right after each
    of them (``issued``, read by the driver's hook, which runs after yours), after
    ``loss.backward()`` returned (``backward``) and after ``finish()`` returned (``finish``),
    how many ``.grad`` changed after ``finish()`` returned (``late_writes``: an all-reduce still
    running), on rank 0 the ranks whose backward pass had not ended after ``HOLD_S`` seconds while
    rank 0 held its own (``stuck``), and the seconds spent in the backward pass and in ``finish()``.
    The timeline is measured in this process: it is feedback, shown and never scored.
    """
    rank, world_size = dist.get_rank(), dist.get_world_size()
    dims, batch = list(inputs["dims"]), int(inputs["batch"])
    model = build_model(int(inputs["seed"]), dims)
    optimizer = build_optimizer(model, inputs)
    ddp = submission.OverlappingDDP(model, bucket_cap_bytes=int(inputs["bucket_cap_bytes"]))

    events: list[tuple[str, int]] = []
    base = [0]
    store, tag = _store(), f"overlap-ddp/{int(inputs['seed'])}"
    stuck: list[list[int]] = []

    def watch(name: str) -> Any:
        def hook(_: torch.Tensor) -> None:
            count = issued() - base[0]
            if rank == 0 and not events and not any(stuck):  # hold only until a first rank got stuck
                stuck.append(_hold(store, tag, len(stuck), world_size))
            events.append((name, count))

        return hook

    for name, p in model.named_parameters():  # after the student's own hooks: these run right after them
        p.register_post_accumulate_grad_hook(watch(name))

    first: dict[str, torch.Tensor] = {}
    timeline: list[dict[str, Any]] = []
    for step in range(int(inputs["steps"])):
        x, y = make_batch(int(inputs["seed"]) + 1 + step, dims, batch)
        optimizer.zero_grad(set_to_none=True)
        events.clear()
        store.set(f"{tag}/start/{step}/{rank}", "1")  # start each step together: no rank far behind
        _arrived(store, [f"{tag}/start/{step}/{r}" for r in range(world_size)], 60.0)
        base[0] = issued()
        loss = F.mse_loss(model(shard(x, rank, world_size)), shard(y, rank, world_size))
        started = time.perf_counter()
        loss.backward()
        backward_s = time.perf_counter() - started
        if rank:
            store.set(f"{tag}/backward/{step}/{rank}", "1")
        elif len(stuck) <= step:
            stuck.append([])  # held no more (or no gradient was ever ready)
        after_backward = issued() - base[0]
        started = time.perf_counter()
        ddp.finish()
        finish_s = time.perf_counter() - started
        after_finish = issued() - base[0]
        done = gradients(model)
        if step == 0:
            first = done
        require_grads(model, "finish()", step, "averaged")
        optimizer.step()
        late = sum(
            int(not torch.equal(done[name], p.grad)) for name, p in model.named_parameters() if p.grad is not None
        )
        timeline.append(
            {
                "order": [name for name, _ in events],
                "issued": torch.tensor([count for _, count in events], dtype=torch.int64),
                "backward": after_backward,
                "finish": after_finish,
                "late_writes": late,
                "stuck": stuck[step] if rank == 0 else [],
                "backward_s": backward_s,
                "finish_s": finish_s,
            }
        )
    params = {name: p.detach().clone() for name, p in model.named_parameters()}
    return {"grads": first, "params": params, "timeline": timeline}


def reference(inputs: dict[str, Any]) -> dict[str, Any]:
    """The same training on one process, one backward of the mean loss over the whole global batch."""
    dims, batch = list(inputs["dims"]), int(inputs["batch"])
    model = build_model(int(inputs["seed"]), dims)
    optimizer = build_optimizer(model, inputs)
    first: dict[str, torch.Tensor] = {}
    for step in range(int(inputs["steps"])):
        x, y = make_batch(int(inputs["seed"]) + 1 + step, dims, batch)
        optimizer.zero_grad(set_to_none=True)
        F.mse_loss(model(x), y).backward()
        if step == 0:
            first = gradients(model)
        optimizer.step()
    return {"grads": first, "params": {name: p.detach().clone() for name, p in model.named_parameters()}}


def ready_order(inputs: dict[str, Any]) -> list[str]:
    """The order in which the parameters' gradients become ready in one backward pass (last layer first)."""
    dims = list(inputs["dims"])
    model = build_model(int(inputs["seed"]), dims)
    order: list[str] = []
    for name, p in model.named_parameters():
        p.register_post_accumulate_grad_hook(lambda _, name=name: order.append(name))
    x, y = make_batch(int(inputs["seed"]) + 1, dims, int(inputs["batch"]))
    F.mse_loss(model(x), y).backward()
    return order
