# per-layer units keep their gathered parameters after the forward (reshard_after_forward=False)
from torch import nn
from torch.distributed.fsdp import fully_shard


def wrap(model: nn.Module, strategy: str) -> nn.Module:
    if strategy == "per-layer":
        for module in model.modules():
            if isinstance(module, nn.Linear):
                fully_shard(module, reshard_after_forward=False)
    elif strategy == "per-block":
        for block in model.blocks:
            fully_shard(block)
    fully_shard(model)
    return model
