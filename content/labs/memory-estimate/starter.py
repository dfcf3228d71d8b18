"""Estimate the memory one training step needs: parameters, gradients, AdamW state, activations.

The grader (its public driver.py) calls, for each of its two models (TwoTowerModel and
CheckpointedTransformer, both defined in driver.py):

    estimate_memory_consumption(model, batch, checkpointing=False)
    estimate_memory_consumption(model, batch, checkpointing=True)

``model`` is a float32 ``torch.nn.Module`` whose ``forward(batch)`` reads the attribute
``model.checkpointing`` (bool): when True it runs its blocks under ``torch.utils.checkpoint``.
``batch`` is the sample input batch (a LongTensor of ids). Return a dict of BYTES (ints or floats)
with exactly these keys:

    "parameters"       bytes of every parameter
    "gradients"        bytes of the gradients one backward pass leaves in the parameters' .grad
    "optimizer_state"  bytes of torch.optim.AdamW's state: exp_avg and exp_avg_sq
    "activations"      bytes autograd saves for backward during model(batch), with
                       model.checkpointing set to ``checkpointing``, parameters excluded
    "total"            the sum of the four figures above

The process has no GPU, so torch.cuda.memory_allocated() cannot help: count the tensors that
autograd saves with torch.autograd.graph.saved_tensors_hooks (see the statement).
"""

import torch


def estimate_memory_consumption(model: torch.nn.Module, batch: torch.Tensor, checkpointing: bool) -> dict:
    parameters = sum(p.numel() * p.element_size() for p in model.parameters())
    # TODO: gradients and AdamW's two moments.
    gradients = 0
    optimizer_state = 0
    # TODO: run model(batch) with model.checkpointing = checkpointing under
    # torch.autograd.graph.saved_tensors_hooks(pack, unpack) and add up the bytes of the distinct
    # storages that pack() sees (t.untyped_storage()), leaving out the parameters' own storages.
    activations = 0
    return {
        "parameters": parameters,
        "gradients": gradients,
        "optimizer_state": optimizer_state,
        "activations": activations,
        "total": parameters + gradients + optimizer_state + activations,
    }
