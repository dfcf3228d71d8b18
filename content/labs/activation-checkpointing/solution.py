"""Reference solution for activation-checkpointing (the project's tests only; never shown to students)."""

import torch
from torch.utils.checkpoint import checkpoint


def checkpointed_forward(blocks: torch.nn.ModuleList, x: torch.Tensor, segments: int) -> torch.Tensor:
    size = len(blocks) // segments

    def segment(start: int):
        def run(h: torch.Tensor) -> torch.Tensor:
            for block in blocks[start : start + size]:
                h = block(h)
            return h

        return run

    for start in range(0, len(blocks), size):
        # Keeps only the segment's input; recomputes the segment (same dropout masks) in backward.
        x = checkpoint(segment(start), x, use_reentrant=False)
    return x
