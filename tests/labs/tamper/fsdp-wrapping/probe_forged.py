"""Wraps every strategy as one unit, then has the driver's ``probe`` report the units and the peak each
strategy should have (worked out from the model, as the statement explains), and all-gathers zeros for
the bytes the missing inner units would have gathered, so the wire looks right too. Imitates:
whole_model_everywhere."""

import driver
import torch
import torch.distributed as dist
from torch import nn

_probe = driver.probe
ROOT = "(root)"


def _unit_bytes(model, strategy):
    if strategy == "per-layer":
        inner = [name for name, m in model.named_modules() if isinstance(m, nn.Linear)]
    elif strategy == "per-block":
        inner = [f"blocks.{i}" for i in range(len(model.blocks))]
    else:
        inner = []
    sizes = {ROOT: 0, **dict.fromkeys(inner, 0)}
    for name, p in model.named_parameters():
        owner = next((u for u in inner if name.startswith(u + ".")), ROOT)
        sizes[owner] += p.numel() * p.element_size()
    return sizes


def _forged_probe(submission, inputs):
    out = _probe(submission, inputs)
    sizes = _unit_bytes(driver.build_model(int(inputs["seed"]), inputs["dims"]), str(inputs["strategy"]))
    inner = [b for unit, b in sizes.items() if unit != ROOT]
    out["units"] = sorted(sizes)
    out["peak_bytes"] = sizes[ROOT] + max(inner, default=0)
    missing = sum(inner)  # one unit gathers everything once; inner units are gathered twice
    n = dist.get_world_size()
    if missing:
        mine = torch.zeros(missing // (8 * n), dtype=torch.float64)
        every = torch.empty(mine.numel() * n, dtype=torch.float64)
        dist.all_gather_into_tensor(every, mine)
    return out


driver.probe = _forged_probe
