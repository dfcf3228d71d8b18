# all-gathers every parameter and compares bit for bit: right answers, but O(model size) bytes
import torch
import torch.distributed as dist


def params_in_sync(model: torch.nn.Module) -> bool:
    mine = torch.cat([p.detach().reshape(-1) for p in model.parameters()])
    everyone = [torch.empty_like(mine) for _ in range(dist.get_world_size())]
    dist.all_gather(everyone, mine)
    return all(torch.equal(other.view(torch.int32), mine.view(torch.int32)) for other in everyone)
