"""Reference solution for fsdp-wrapping (the project's tests only; never shown to students)."""

from torch import nn
from torch.distributed.fsdp import fully_shard


def wrap(model: nn.Module, strategy: str) -> nn.Module:
    if strategy == "per-layer":
        for module in model.modules():
            if isinstance(module, nn.Linear):
                fully_shard(module)
    elif strategy == "per-block":
        for block in model.blocks:
            fully_shard(block)
    elif strategy != "whole-model":
        raise ValueError(f"unknown strategy {strategy!r}")
    fully_shard(model)  # the root last: it holds whatever no inner unit took
    return model
