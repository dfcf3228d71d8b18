# detaches each segment's input before checkpointing it: no gradient flows back past a segment
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
        x = x.detach().requires_grad_()  # "only the input is kept": but the graph is cut here
        x = checkpoint(segment(start), x, use_reentrant=False)
    return x
