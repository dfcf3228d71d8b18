# per-block passes the list of blocks to one fully_shard call: all blocks become a single unit, whole at once
from torch import nn
from torch.distributed.fsdp import fully_shard


def wrap(model: nn.Module, strategy: str) -> nn.Module:
    if strategy == "per-layer":
        for module in model.modules():
            if isinstance(module, nn.Linear):
                fully_shard(module)
    elif strategy == "per-block":
        fully_shard(list(model.blocks))
    fully_shard(model)
    return model
