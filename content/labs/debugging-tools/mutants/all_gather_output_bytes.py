# records an all_gather's bytes as the whole gathered output (every rank's tensor), not the tensor this rank sends
import time

import torch
import torch.distributed as dist


def gradient_norms(model: torch.nn.Module) -> torch.Tensor:
    grads = [p.grad.detach() for p in model.parameters() if p.grad is not None]
    local = torch.stack([g.pow(2).sum() for g in grads]).sum().sqrt().reshape(1)
    gathered = [torch.empty_like(local) for _ in range(dist.get_world_size())]
    dist.all_gather(gathered, local)  # a few bytes per rank, never the gradients themselves
    return torch.cat(gathered)


def losses_in_sync(loss: torch.Tensor) -> bool:
    value = loss.detach().to(torch.float64).reshape(1)
    high, low = value.clone(), value.clone()
    dist.all_reduce(high, op=dist.ReduceOp.MAX)
    dist.all_reduce(low, op=dist.ReduceOp.MIN)
    return bool(torch.equal(high, low))  # every rank sees the same max and min: the same answer


class CommProfiler:
    def __init__(self) -> None:
        self.rows: list[dict[str, object]] = []

    def _timed(self, name: str, tensor: torch.Tensor, run) -> None:  # type: ignore[no-untyped-def]
        start = time.perf_counter()
        run()  # gloo's collectives block until done, so this is the whole collective
        seconds = time.perf_counter() - start
        self.rows.append({"op": name, "bytes": tensor.numel() * tensor.element_size(), "seconds": seconds})

    def all_reduce(self, tensor: torch.Tensor, op=dist.ReduceOp.SUM) -> None:  # type: ignore[no-untyped-def]
        self._timed("all_reduce", tensor, lambda: dist.all_reduce(tensor, op=op))

    def broadcast(self, tensor: torch.Tensor, src: int) -> None:
        self._timed("broadcast", tensor, lambda: dist.broadcast(tensor, src=src))

    def all_gather(self, tensor_list: list[torch.Tensor], tensor: torch.Tensor) -> None:
        start = time.perf_counter()
        dist.all_gather(tensor_list, tensor)
        seconds = time.perf_counter() - start
        nbytes = sum(t.numel() * t.element_size() for t in tensor_list)
        self.rows.append({"op": "all_gather", "bytes": nbytes, "seconds": seconds})

    def table(self) -> list[dict[str, object]]:
        return list(self.rows)
