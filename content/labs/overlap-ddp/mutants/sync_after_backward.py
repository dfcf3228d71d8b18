# right buckets, but every bucket is all-reduced in finish(), after backward: no overlap at all
import torch
import torch.distributed as dist


class OverlappingDDP:
    def __init__(self, model: torch.nn.Module, bucket_cap_bytes: int) -> None:
        self.world_size = dist.get_world_size()
        self.buckets: list[list[torch.nn.Parameter]] = [[]]
        size = 0
        for p in reversed(list(model.parameters())):
            self.buckets[-1].append(p)
            size += p.numel() * p.element_size()
            if size >= bucket_cap_bytes:
                self.buckets.append([])
                size = 0
        if not self.buckets[-1]:
            self.buckets.pop()

    def finish(self) -> None:
        works = []
        for bucket in self.buckets:
            flat = torch.cat([p.grad.reshape(-1) for p in bucket])
            works.append((dist.all_reduce(flat, async_op=True), flat, bucket))
        for work, flat, bucket in works:
            work.wait()
            flat /= self.world_size
            offset = 0
            for p in bucket:
                p.grad.copy_(flat[offset : offset + p.numel()].view_as(p))
                offset += p.numel()
