"""Checkpoint resharding: save a sharded model and its optimizer on 4 ranks, load them on 2.

The default process group (gloo) is already initialised when this module is imported.
The grader's public driver gives you a model sharded with FSDP2 (``fully_shard`` on every
Linear, then on the whole model: its parameters are DTensor shards) and its
``torch.optim.AdamW``:

    phase "save", 4 ranks:  train 3 steps, then save_checkpoint(model, optimizer, path)
    phase "load", 2 ranks:  a fresh model (other weights) sharded the same way, a fresh AdamW,
                            load_checkpoint(model, optimizer, path), then one more step

``path`` is the same directory in both phases (it exists; write anything you need under it).
Every rank calls your functions. After load_checkpoint the model and the optimizer must be
exactly where training left them on 4 ranks, resharded for 2.

Useful: torch.distributed.checkpoint (save, load: every rank writes and reads its own
shards) and torch.distributed.checkpoint.state_dict (get_state_dict, set_state_dict).
"""

import torch


def save_checkpoint(model: torch.nn.Module, optimizer: torch.optim.Optimizer, path: str) -> None:
    """Write the model's parameters and the optimizer's state under ``path``, each rank its own shards."""
    raise NotImplementedError


def load_checkpoint(model: torch.nn.Module, optimizer: torch.optim.Optimizer, path: str) -> None:
    """Fill this rank's shards of the model and of the optimizer's state from ``path``, in place."""
    raise NotImplementedError
