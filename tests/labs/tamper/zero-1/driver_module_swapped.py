"""Swaps the whole public driver in ``sys.modules`` for a copy whose ``train`` reports the state of a
sharded optimizer (two moments of a 1/N slice), while the optimizer keeps full AdamW state on every
rank. Imitates: full_state_every_rank."""

import math
import sys
import types

import driver as _published
import torch.distributed as dist

_fake = types.ModuleType("driver")
_fake.__dict__.update(_published.__dict__)


def _train(submission, inputs):
    out = _published.train(submission, inputs)
    numel = sum(t.numel() for t in out["params"].values())
    shard = math.ceil(numel / dist.get_world_size()) * 8
    out["state_bytes"] = 2 * shard
    out["state_tensors"] = [["optimizer.exp_avg", shard], ["optimizer.exp_avg_sq", shard]]
    return out


_fake.train = _train
sys.modules["driver"] = _fake
