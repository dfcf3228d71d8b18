# no mixed-precision policy at all: float32 parameters, compute and reduction
from torch import nn
from torch.distributed.fsdp import fully_shard


def wrap(model: nn.Module) -> nn.Module:
    for block in model.blocks:
        fully_shard(block)
    fully_shard(model)
    return model
