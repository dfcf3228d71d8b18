# reduces each gradient to rank 0, which averages and broadcasts it: right values, more bytes
import torch
import torch.distributed as dist


def sync_gradients(model: torch.nn.Module) -> None:
    world_size = dist.get_world_size()
    for p in model.parameters():
        if p.grad is None:
            continue
        dist.reduce(p.grad, dst=0)
        if dist.get_rank() == 0:
            p.grad /= world_size
        dist.broadcast(p.grad, src=0)
