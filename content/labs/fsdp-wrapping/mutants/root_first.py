# wraps the root before the inner units (FSDP2 needs the inner units first)
from torch import nn
from torch.distributed.fsdp import fully_shard


def wrap(model: nn.Module, strategy: str) -> nn.Module:
    fully_shard(model)
    if strategy == "per-layer":
        for module in model.modules():
            if isinstance(module, nn.Linear):
                fully_shard(module)
    elif strategy == "per-block":
        for block in model.blocks:
            fully_shard(block)
    return model
