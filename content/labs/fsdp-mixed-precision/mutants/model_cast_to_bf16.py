# casts the whole model to bfloat16 before sharding: no float32 master weights, bfloat16 everything
import torch
from torch import nn
from torch.distributed.fsdp import MixedPrecisionPolicy, fully_shard


def wrap(model: nn.Module) -> nn.Module:
    model.to(torch.bfloat16)
    policy = MixedPrecisionPolicy(param_dtype=torch.bfloat16, reduce_dtype=torch.float32)
    for block in model.blocks:
        fully_shard(block, mp_policy=policy)
    fully_shard(model, mp_policy=policy)
    return model
