# counts every saved tensor's bytes, weights included and shared storages several times

import torch


def estimate_memory_consumption(model: torch.nn.Module, batch: torch.Tensor, checkpointing: bool) -> dict:
    params = list(model.parameters())
    trainable = [p for p in params if p.requires_grad]
    parameters = sum(p.numel() * p.element_size() for p in params)
    gradients = sum(p.numel() * p.element_size() for p in trainable)
    optimizer_state = 2 * gradients  # AdamW: exp_avg and exp_avg_sq, each the size of its parameter

    saved: list[int] = []

    def pack(t: torch.Tensor) -> torch.Tensor:
        saved.append(t.numel() * t.element_size())  # every saved tensor, as it comes
        return t

    before = model.checkpointing
    model.checkpointing = checkpointing
    try:
        with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
            model(batch)
    finally:
        model.checkpointing = before
    activations = sum(saved)
    return {
        "parameters": parameters,
        "gradients": gradients,
        "optimizer_state": optimizer_state,
        "activations": activations,
        "total": parameters + gradients + optimizer_state + activations,
    }
