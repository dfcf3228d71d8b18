# takes the segment count for the segment length: L/k segments of k blocks instead of k of L/k
import torch
from torch.utils.checkpoint import checkpoint


def checkpointed_forward(blocks: torch.nn.ModuleList, x: torch.Tensor, segments: int) -> torch.Tensor:
    size = segments

    def segment(start: int):
        def run(h: torch.Tensor) -> torch.Tensor:
            for block in blocks[start : start + size]:
                h = block(h)
            return h

        return run

    for start in range(0, len(blocks), size):
        x = checkpoint(segment(start), x, use_reentrant=False)
    return x
