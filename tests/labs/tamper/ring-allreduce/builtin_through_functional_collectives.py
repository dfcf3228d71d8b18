"""Calls the built-in all-reduce through ``torch.distributed._functional_collectives``, whose ops go
to the dispatcher directly, past the wrappers that count built-in collectives in the rank. Imitates:
builtin_all_reduce."""

import torch.distributed as dist
from torch.distributed import _functional_collectives as funcol


def ring_all_reduce(tensor):
    tensor.copy_(funcol.all_reduce(tensor, "sum", dist.group.WORLD).wait())
