"""FSDP wrapping: shard one model three ways with FSDP2's fully_shard.

The default process group (backend gloo) is already initialised when this module is imported.
The grader's public driver builds the model below on every rank (the same float64 parameters
everywhere), calls your wrap(model, strategy) once per strategy, trains it with AdamW on this
rank's shard of each batch and measures it:

    Net(
      embed:  Linear(120, 120)
      blocks: ModuleList of 2 Block, each  x + down(tanh(up(x)))  with up, down: Linear(120, 120)
      norm:   LayerNorm(120)
      head:   Linear(120, 120)
    )

strategy is one of:
    "per-layer"    every nn.Linear (embed, head, and up and down in every block) is its own FSDP unit
    "per-block"    every element of model.blocks is its own FSDP unit
    "whole-model"  the whole model is one FSDP unit
In every strategy the model itself is the root unit: it holds every parameter that no inner
unit took (per-layer: the LayerNorm; whole-model: everything).
"""

from torch import nn
from torch.distributed.fsdp import fully_shard  # noqa: F401  (yours to call)


def wrap(model: nn.Module, strategy: str) -> nn.Module:
    """Apply fully_shard to the units that ``strategy`` names, then to the root; return the model.

    Use fully_shard's defaults (shard every parameter's rows over all ranks; inner units reshard
    after their forward, the root keeps its parameters for the backward). FSDP2 needs the inner
    units wrapped before the module that contains them.
    """
    if strategy == "per-layer":
        raise NotImplementedError("fully_shard every nn.Linear, then the root")
    if strategy == "per-block":
        raise NotImplementedError("fully_shard every block in model.blocks, then the root")
    if strategy == "whole-model":
        raise NotImplementedError("fully_shard the root only")
    raise ValueError(f"unknown strategy {strategy!r}")
