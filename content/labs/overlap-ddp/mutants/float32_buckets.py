# all-reduces each bucket in float32 to halve the bytes: the float64 gradients lose precision on the way
import torch
import torch.distributed as dist


class OverlappingDDP:
    def __init__(self, model: torch.nn.Module, bucket_cap_bytes: int) -> None:
        params = list(model.parameters())
        self.buckets: list[list[torch.nn.Parameter]] = [[]]
        size = 0
        for p in reversed(params):
            self.buckets[-1].append(p)
            size += p.numel() * p.element_size()
            if size >= bucket_cap_bytes:
                self.buckets.append([])
                size = 0
        if not self.buckets[-1]:
            self.buckets.pop()
        self.bucket_of = {p: i for i, bucket in enumerate(self.buckets) for p in bucket}
        self.pending = [len(b) for b in self.buckets]
        self.works: list[tuple[dist.Work, torch.Tensor, int]] = []
        for p in params:
            p.register_post_accumulate_grad_hook(self._ready)

    def _ready(self, p: torch.Tensor) -> None:
        i = self.bucket_of[p]
        self.pending[i] -= 1
        if self.pending[i] == 0:
            flat = torch.cat([q.grad.reshape(-1) for q in self.buckets[i]]).float()
            self.works.append((dist.all_reduce(flat, async_op=True), flat, i))

    def finish(self) -> None:
        for work, flat, i in self.works:
            work.wait()
            flat /= dist.get_world_size()
            offset = 0
            for q in self.buckets[i]:
                q.grad.copy_(flat[offset : offset + q.numel()].view_as(q))
                offset += q.numel()
        self.works.clear()
        self.pending = [len(b) for b in self.buckets]
