# overlaps, but starts one async all-reduce per parameter from its hook: no buckets at all
import torch
import torch.distributed as dist


class OverlappingDDP:
    def __init__(self, model: torch.nn.Module, bucket_cap_bytes: int) -> None:
        self.world_size = dist.get_world_size()
        self.works: list[tuple[dist.Work, torch.Tensor]] = []
        for p in model.parameters():
            p.register_post_accumulate_grad_hook(self._ready)

    def _ready(self, p: torch.Tensor) -> None:
        self.works.append((dist.all_reduce(p.grad, async_op=True), p.grad))

    def finish(self) -> None:
        for work, grad in self.works:
            work.wait()
            grad /= self.world_size
        self.works.clear()
