"""Memory profile on a GPU: where a training step's memory goes.

The grader's public driver (read driver.py) warms the GPU up, puts a batch of token ids on it
and calls profile_memory(make_model, tokens, targets): make_model() builds a fresh float32
transformer on the CPU, and model(tokens, targets) returns its mean cross-entropy loss. Then it
calls chapter_formula(num_params, num_trainable) with the model's parameter counts.
"""

import torch


def profile_memory(make_model, tokens: torch.Tensor, targets: torch.Tensor) -> dict:
    """Run one AdamW training step on tokens.device and return bytes, measured with
    torch.cuda.memory_allocated(), under exactly these keys:

    "parameters":        the model moved to the GPU
    "activations":       what loss = model(tokens, targets) leaves allocated for the backward pass
    "gradients":         what stays after loss.backward() (and del loss), beyond the model
    "optimizer_states":  what torch.optim.AdamW's first step() allocates
    """
    # TODO: read torch.cuda.memory_allocated() before and after each stage.
    raise NotImplementedError("measure one training step's memory")


def chapter_formula(num_params: int, num_trainable: int) -> dict:
    """The chapter's prediction in bytes for float32 AdamW training: "parameters", "gradients",
    "optimizer_states" (num_trainable of the num_params parameters train)."""
    raise NotImplementedError("4P, 4P and 8P bytes")
