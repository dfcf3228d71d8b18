# float16 parameters and compute instead of bfloat16
import torch
from torch import nn
from torch.distributed.fsdp import MixedPrecisionPolicy, fully_shard


def wrap(model: nn.Module) -> nn.Module:
    policy = MixedPrecisionPolicy(param_dtype=torch.float16, reduce_dtype=torch.float32)
    for block in model.blocks:
        fully_shard(block, mp_policy=policy)
    fully_shard(model, mp_policy=policy)
    return model
