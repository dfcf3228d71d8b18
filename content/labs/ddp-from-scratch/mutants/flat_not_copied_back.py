# all-reduces a flat copy of the gradients but never copies the averages back into .grad
import torch
import torch.distributed as dist


def sync_gradients(model: torch.nn.Module) -> None:
    grads = [p.grad for p in model.parameters() if p.grad is not None]
    flat = torch.cat([g.reshape(-1) for g in grads])
    dist.all_reduce(flat)
    flat /= dist.get_world_size()
    for g in grads:
        g = flat[: g.numel()].view_as(g)  # rebinds the name only: p.grad is unchanged
