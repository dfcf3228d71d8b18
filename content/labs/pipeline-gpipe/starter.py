"""Pipeline parallelism: one GPipe training step over N stages, with send/recv and micro-batches.

The default process group (backend gloo) is already initialised when this module is
imported: rank r = dist.get_rank() is pipeline stage r of N = dist.get_world_size(). The
grader's public driver (see the statement) builds this rank's stage of the model and calls,
on every rank at once:

    losses = gpipe_step(stage, inputs, targets, num_micro_batches, activation_shape, loss_fn)

stage             this rank's layers (a torch.nn.Module, float64): out = stage(x)
inputs            the whole batch, B x in_features, on rank 0 only (None elsewhere)
targets           its targets, B x out_features, on the last rank only (None elsewhere)
num_micro_batches M; B is a multiple of M
activation_shape  (B // M, hidden): the shape of one micro-batch's activation that crosses
                  every stage boundary, and of its gradient (float64)
loss_fn           loss_fn(output, target): the mean squared error of one micro-batch

Return the M micro-batch losses (floats, in micro-batch order) on the last rank; anything
(None) on the others. Move tensors with dist.send/dist.recv (or isend/irecv) between
neighbouring stages only.
"""

from collections.abc import Callable

import torch
import torch.distributed as dist


def gpipe_step(
    stage: torch.nn.Module,
    inputs: torch.Tensor | None,
    targets: torch.Tensor | None,
    num_micro_batches: int,
    activation_shape: tuple[int, int],
    loss_fn: Callable[[torch.Tensor, torch.Tensor], torch.Tensor],
) -> list[float] | None:
    """Leave in every parameter's ``.grad`` the gradient of L = (1/M) sum_m loss_fn(out_m, y_m).

    1. Forward, for each of the M micro-batches in order: rank 0 takes its slice of ``inputs``
       (``inputs.chunk(M)``); every other rank receives the previous stage's activation into a
       fresh float64 buffer of ``activation_shape`` and marks it ``requires_grad_()``. Run
       ``stage(x)``; send the output (detached) to the next stage, or, on the last stage, compute
       the micro-batch's loss. Keep every micro-batch's input and output for its backward.
    2. Backward, after all M forwards: for each micro-batch, the last stage backpropagates
       its loss / M; the others receive the gradient of their output from the next stage and
       backpropagate it through the kept output. Send the gradient of the kept input (x.grad)
       to the previous stage. Autograd adds every micro-batch's gradient into .grad.
    """
    rank, world_size = dist.get_rank(), dist.get_world_size()
    # TODO: steps 1 and 2 above.
    raise NotImplementedError(
        f"stage {rank} of {world_size}: {num_micro_batches} forwards, then {num_micro_batches} backwards"
    )
