# one unit for the whole model (no unit per block): right numbers, but nothing is gathered again for the backward
import torch
from torch.distributed.fsdp import MixedPrecisionPolicy, fully_shard


def wrap(model):
    return fully_shard(model, mp_policy=MixedPrecisionPolicy(param_dtype=torch.bfloat16, reduce_dtype=torch.float32))
