# per-layer wraps only the Linear layers inside the blocks: embed and head stay in the root unit
from torch import nn
from torch.distributed.fsdp import fully_shard


def wrap(model: nn.Module, strategy: str) -> nn.Module:
    if strategy == "per-layer":
        for block in model.blocks:
            for module in block.modules():
                if isinstance(module, nn.Linear):
                    fully_shard(module)
    elif strategy == "per-block":
        for block in model.blocks:
            fully_shard(block)
    fully_shard(model)
    return model
