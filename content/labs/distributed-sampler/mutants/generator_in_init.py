# one generator made in __init__ draws a new permutation on every pass: epochs differ, but not reproducibly
from collections.abc import Iterator

import torch


class ShardedSampler(torch.utils.data.Sampler[int]):
    def __init__(self, dataset_size: int, num_replicas: int, rank: int, shuffle: bool = True, seed: int = 0) -> None:
        self.dataset_size, self.num_replicas, self.rank = dataset_size, num_replicas, rank
        self.shuffle, self.epoch = shuffle, 0
        self.gen = torch.Generator().manual_seed(seed)
        self.num_samples = -(-dataset_size // num_replicas)
        self.total_size = self.num_samples * num_replicas

    def __iter__(self) -> Iterator[int]:
        if self.shuffle:
            order = torch.randperm(self.dataset_size, generator=self.gen).tolist()
        else:
            order = list(range(self.dataset_size))
        order += order[: self.total_size - len(order)]
        return iter(order[self.rank : self.total_size : self.num_replicas])

    def __len__(self) -> int:
        return self.num_samples

    def set_epoch(self, epoch: int) -> None:
        self.epoch = epoch
