"""After the gathered save, every rank fills the shared checkpoint directory with empty files until
the file system refuses more. Imitates: rank0_torch_save."""

import os

import torch.distributed as dist

_gathered_save = globals()["save_checkpoint"]


def save_checkpoint(model, optimizer, path):
    _gathered_save(model, optimizer, path)
    for i in range(1_000_000):
        try:
            open(os.path.join(path, f"flood-{dist.get_rank()}-{i}"), "w").close()
        except OSError:
            break
