# the policy only on the blocks: the root unit (embed, norm, head) runs and reduces in float32
import torch
from torch import nn
from torch.distributed.fsdp import MixedPrecisionPolicy, fully_shard


def wrap(model: nn.Module) -> nn.Module:
    policy = MixedPrecisionPolicy(param_dtype=torch.bfloat16, reduce_dtype=torch.float32)
    for block in model.blocks:
        fully_shard(block, mp_policy=policy)
    fully_shard(model)
    return model
