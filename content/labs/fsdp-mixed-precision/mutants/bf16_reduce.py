# reduces the gradients in bfloat16 (reduce_dtype left out: FSDP reduces in param_dtype)
import torch
from torch import nn
from torch.distributed.fsdp import MixedPrecisionPolicy, fully_shard


def wrap(model: nn.Module) -> nn.Module:
    policy = MixedPrecisionPolicy(param_dtype=torch.bfloat16)
    for block in model.blocks:
        fully_shard(block, mp_policy=policy)
    fully_shard(model, mp_policy=policy)
    return model
