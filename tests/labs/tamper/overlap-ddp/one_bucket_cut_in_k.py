"""Keeps one bucket for the whole model, as if the cap did not exist, but sends it in finish() as k
all-reduces of equal slices, k being the number of buckets DDP's rule makes, to look like k real
buckets on the wire. It frames k full all-reduces per step, where the real buckets frame k - 1 + 1/N
(their last, the first layer's 16 bytes, is framed as 1/N of a full one), so the bucket check still
fails. Imitates: cap_ignored."""

import torch
import torch.distributed as dist

_OneBucket = globals()["OverlappingDDP"]


def _bucket_count(model, cap):
    """DDP's rule: walk the parameters in reverse, close a bucket once it holds at least ``cap`` bytes."""
    count, size = 0, 0
    for p in reversed(list(model.parameters())):
        size += p.numel() * p.element_size()
        if size >= cap:
            count, size = count + 1, 0
    return count + (1 if size else 0)


class OverlappingDDP(_OneBucket):
    def __init__(self, model, bucket_cap_bytes):
        super().__init__(model, bucket_cap_bytes)
        self.params = list(model.parameters())
        self.slices = _bucket_count(model, bucket_cap_bytes)

    def _ready(self, p):
        return None  # nothing is sent during backward

    def finish(self):
        flat = torch.cat([p.grad.reshape(-1) for p in self.params])
        for part in flat.tensor_split(self.slices):
            dist.all_reduce(part)
        flat /= dist.get_world_size()
        offset = 0
        for p in self.params:
            p.grad.copy_(flat[offset : offset + p.numel()].view_as(p))
            offset += p.numel()
