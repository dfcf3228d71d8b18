"""Activation checkpointing: run a stack of transformer blocks so that backward recomputes them.

Write ``checkpointed_forward(blocks, x, segments) -> torch.Tensor``:

    blocks    a torch.nn.ModuleList of L = 12 transformer blocks (float64, dropout on)
    x         the stack's input, shape (batch, tokens, dim); it requires grad
    segments  k, the number of segments; it divides L (the grader uses k = 2, 3, 4 and 6)

Return what running the blocks one after the other returns (blocks[0] first), but cut the stack
into k segments of L/k consecutive blocks and checkpoint each one: keep only the segment's input
for the backward pass, and recompute the segment's activations from it when its gradient is needed.
Use torch.utils.checkpoint.checkpoint, or write your own torch.autograd.Function. The blocks use
dropout: a recomputation must draw the same dropout masks as the forward did.

The grader's public driver.py then calls (y * w).sum().backward() and compares the output and every
gradient with plain backpropagation; in its memory cases the kernel measures the memory your process adds.
"""

import torch


def checkpointed_forward(blocks: torch.nn.ModuleList, x: torch.Tensor, segments: int) -> torch.Tensor:
    size = len(blocks) // segments
    for start in range(0, len(blocks), size):
        segment = blocks[start : start + size]
        # TODO: run this segment under torch.utils.checkpoint.checkpoint(...) (use_reentrant=False)
        # so that only its input is kept for backward, instead of every block's activations.
        for block in segment:
            x = block(x)
    return x
