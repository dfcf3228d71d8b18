# all-gathers the gradients and averages them locally: right values, (N-1) x S bytes per rank
import torch
import torch.distributed as dist


def sync_gradients(model: torch.nn.Module) -> None:
    world_size = dist.get_world_size()
    for p in model.parameters():
        if p.grad is None:
            continue
        parts = [torch.empty_like(p.grad) for _ in range(world_size)]
        dist.all_gather(parts, p.grad)
        p.grad.copy_(torch.stack(parts).mean(dim=0))
