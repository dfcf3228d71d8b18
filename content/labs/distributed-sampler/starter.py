"""A distributed sampler: every rank gets an equal share of a fresh permutation each epoch.

The grader's public driver builds, on every rank,

    sampler = ShardedSampler(dataset_size, num_replicas=world_size, rank=rank, shuffle=..., seed=...)

and for each epoch calls ``sampler.set_epoch(epoch)`` and then ``list(sampler)``. It compares
what the ranks got outside your code: together they must cover the data set (padded, as
torch.utils.data.DistributedSampler pads, when the size is not divisible by the number of
replicas), every rank the same count, a new shuffle every epoch, and the same indices again
for the same seed and epoch. Write the sampler yourself: no DistributedSampler inside.
"""

from collections.abc import Iterator

import torch


class ShardedSampler(torch.utils.data.Sampler[int]):
    def __init__(self, dataset_size: int, num_replicas: int, rank: int, shuffle: bool = True, seed: int = 0) -> None:
        self.dataset_size = dataset_size  # indices are 0 .. dataset_size - 1
        self.num_replicas = num_replicas  # the number of ranks sharing the data set
        self.rank = rank  # this rank, 0 .. num_replicas - 1
        self.shuffle = shuffle
        self.seed = seed  # the same on every rank
        self.epoch = 0

    def __iter__(self) -> Iterator[int]:
        """This rank's indices for the current epoch, as ints.

        Every rank must shuffle the SAME way (a torch.Generator seeded from the seed and the
        epoch, not from the rank), pad the permutation to a multiple of num_replicas by
        repeating its first indices, and then take its own share of it.
        """
        # TODO: build the epoch's permutation (or range(dataset_size) without shuffle),
        # pad it, and return an iterator over this rank's part of it.
        raise NotImplementedError("yield this rank's share of the epoch's permutation")

    def __len__(self) -> int:
        """How many indices __iter__ yields: the same on every rank."""
        raise NotImplementedError("return the number of indices per rank")

    def set_epoch(self, epoch: int) -> None:
        """Called by the training loop before each epoch: the next __iter__ uses this epoch."""
        raise NotImplementedError("remember the epoch")
