# per-block wraps the Linear layers inside each block instead of the blocks themselves
from torch import nn
from torch.distributed.fsdp import fully_shard


def wrap(model: nn.Module, strategy: str) -> nn.Module:
    if strategy == "per-layer":
        for module in model.modules():
            if isinstance(module, nn.Linear):
                fully_shard(module)
    elif strategy == "per-block":
        for block in model.blocks:
            fully_shard(block.up)
            fully_shard(block.down)
    fully_shard(model)
    return model
