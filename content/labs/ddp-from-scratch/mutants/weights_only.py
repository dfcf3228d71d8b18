# all-reduces only the weight matrices; the biases keep each rank's own gradient
import torch
import torch.distributed as dist


def sync_gradients(model: torch.nn.Module) -> None:
    world_size = dist.get_world_size()
    for name, p in model.named_parameters():
        if name.endswith("weight") and p.grad is not None:
            dist.all_reduce(p.grad)
            p.grad /= world_size
