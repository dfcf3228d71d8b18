# per-layer wraps every Linear but forgets the root fully_shard(model): the LayerNorm stays unsharded
from torch import nn
from torch.distributed.fsdp import fully_shard


def wrap(model: nn.Module, strategy: str) -> nn.Module:
    if strategy == "per-layer":
        for module in model.modules():
            if isinstance(module, nn.Linear):
                fully_shard(module)
        return model
    if strategy == "per-block":
        for block in model.blocks:
            fully_shard(block)
    fully_shard(model)
    return model
