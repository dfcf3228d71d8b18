"""Parameter-sync check: is every rank's copy of the model bitwise identical?

The default process group (backend gloo) is already initialised when this module is
imported: use dist.get_rank() and dist.get_world_size(). The grader's public driver calls,
on every rank at the same time,

    params_in_sync(model)          # <- yours; model: this rank's float32 copy (~18k parameters)

and compares what each rank returned with the truth. Every rank must return the same bool.
Send O(1) bytes per rank (a fixed-size fingerprint), never the parameters themselves.
"""

import torch
import torch.distributed as dist


def params_in_sync(model: torch.nn.Module) -> bool:
    """True on every rank if every parameter is bitwise identical on all ranks, else False on every rank.

    One ulp of difference in one element counts, and so do two elements swapped within a
    tensor (their sum does not change). Compute a fingerprint of this rank's parameters that
    changes with any bit of any element and with its position, exchange only that (a few
    numbers, whatever the model's size), and compare: for example all-reduce it with
    ReduceOp.MAX and with ReduceOp.MIN; the copies agree when the two results are equal.
    """
    fingerprint = torch.zeros(4, dtype=torch.int64)
    for p in model.parameters():
        # TODO: fold p's bits into the fingerprint (p.detach().view(torch.int32) gives the bit
        # patterns; hashlib.sha256 over p.detach().numpy() is another way).
        raise NotImplementedError(f"fingerprint this rank's parameters, e.g. one of shape {tuple(p.shape)}")
    # TODO: exchange the fingerprint with dist.all_reduce and return the same bool on every rank.
    raise NotImplementedError(f"compare {fingerprint.numel()} numbers across {dist.get_world_size()} ranks")
