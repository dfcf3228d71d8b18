# no padding: takes perm[rank::num_replicas], so ranks get unequal counts when the size is not divisible
from collections.abc import Iterator

import torch


class ShardedSampler(torch.utils.data.Sampler[int]):
    def __init__(self, dataset_size: int, num_replicas: int, rank: int, shuffle: bool = True, seed: int = 0) -> None:
        self.dataset_size, self.num_replicas, self.rank = dataset_size, num_replicas, rank
        self.shuffle, self.seed, self.epoch = shuffle, seed, 0

    def __iter__(self) -> Iterator[int]:
        if self.shuffle:
            gen = torch.Generator().manual_seed(self.seed + self.epoch)
            order = torch.randperm(self.dataset_size, generator=gen).tolist()
        else:
            order = list(range(self.dataset_size))
        return iter(order[self.rank :: self.num_replicas])

    def __len__(self) -> int:
        return len(range(self.rank, self.dataset_size, self.num_replicas))

    def set_epoch(self, epoch: int) -> None:
        self.epoch = epoch
