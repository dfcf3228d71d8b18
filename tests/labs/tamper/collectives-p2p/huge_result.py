"""Returns 200 MB from every all_gather, far more than any result of this lab. Imitates: the starter."""

import torch


def all_gather(tensor):
    return torch.zeros(50_000_000, dtype=torch.float32)


def all_reduce(tensor):
    raise NotImplementedError


def reduce_scatter(tensor):
    raise NotImplementedError
