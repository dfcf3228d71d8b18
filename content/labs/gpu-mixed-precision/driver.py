"""Public driver for gpu-mixed-precision: the model, the loop around your step, the fp32 comparison.

Not secret: read it to see exactly what the grader does. ``train`` builds a small MLP in float32
on the GPU from the seed it is given, an SGD optimizer with momentum and a
``torch.amp.GradScaler`` (a large initial scale and a short growth interval, so that scaling
moves during a few steps), then calls your ``amp_train_step`` once per batch. One batch is
multiplied by a large factor: its scaled gradients overflow float16, and a correct step skips
it. Around each call it records the loss you return, the scaler's scale, whether the
parameters moved, and (with forward hooks) the dtype of every ``Linear`` layer's output.
The grader runs the reference solution through this same function, outside your process, and
compares.

``benchmark`` then times the same kind of step in plain float32 (written here) and yours on a
larger MLP, and measures each one's peak GPU memory with ``torch.cuda.max_memory_allocated``:
for you to read. Those figures and the layers' dtypes are measured in your process, so they are
feedback and score nothing; the losses, parameters, scales and skipped steps are compared with the
reference run outside it.
"""

from __future__ import annotations

import time
from typing import Any

import torch
import torch.nn.functional as F

LAYERS = ("fc1", "fc2", "fc3")


class MLP(torch.nn.Module):
    """``fc1, ReLU, fc2, ReLU, fc3``: three ``Linear`` layers, float32."""

    def __init__(self, d_in: int, hidden: int, classes: int) -> None:
        super().__init__()
        self.fc1 = torch.nn.Linear(d_in, hidden)
        self.fc2 = torch.nn.Linear(hidden, hidden)
        self.fc3 = torch.nn.Linear(hidden, classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc3(F.relu(self.fc2(F.relu(self.fc1(x)))))


def device() -> torch.device:
    """The rank's GPU (the grader runs this lab on one); the CPU only where there is none."""
    if torch.cuda.is_available():
        return torch.device("cuda", torch.cuda.current_device())
    return torch.device("cpu")


def build(config: dict[str, Any], where: torch.device) -> tuple[MLP, torch.Tensor, torch.Tensor]:
    """The model and every step's batch, from the seed: the same on every machine."""
    torch.manual_seed(int(config["seed"]))
    model = MLP(config["d_in"], config["hidden"], config["classes"]).to(where)
    gen = torch.Generator().manual_seed(int(config["seed"]) + 1)
    steps, batch = int(config["steps"]), int(config["batch"])
    xs = torch.randn(steps, batch, config["d_in"], generator=gen)
    xs[int(config["spike_step"])] *= float(config["spike"])  # its scaled gradients overflow float16
    ys = torch.randint(0, config["classes"], (steps, batch), generator=gen)
    return model, xs.to(where), ys.to(where)


def make_scaler(config: dict[str, Any], where: torch.device) -> torch.amp.GradScaler:
    return torch.amp.GradScaler(
        where.type, init_scale=float(config["init_scale"]), growth_interval=int(config["growth_interval"])
    )


def train(submission: Any, inputs: dict[str, Any]) -> dict[str, Any]:
    """``inputs["steps"]`` calls of ``submission.amp_train_step``; what the judge compares."""
    where = device()
    model, xs, ys = build(inputs, where)
    optimizer = torch.optim.SGD(model.parameters(), lr=float(inputs["lr"]), momentum=0.9)
    scaler = make_scaler(inputs, where)
    seen: dict[str, set[str]] = {name: set() for name in LAYERS}
    hooks = [
        getattr(model, name).register_forward_hook(lambda _m, _i, out, name=name: seen[name].add(str(out.dtype)))
        for name in LAYERS
    ]
    losses, scales, skipped = [], [], []
    for step in range(int(inputs["steps"])):
        before = [p.detach().clone() for p in model.parameters()]
        loss = submission.amp_train_step(model, optimizer, scaler, xs[step], ys[step], float(inputs["max_norm"]))
        if not isinstance(loss, torch.Tensor) or loss.numel() != 1:
            raise TypeError(f"amp_train_step must return the loss as a one-element tensor, got {type(loss).__name__}")
        losses.append(float(loss.detach().float()))
        scales.append(float(scaler.get_scale()))
        skipped.append(all(torch.equal(b, p.detach()) for b, p in zip(before, model.parameters(), strict=True)))
    for hook in hooks:
        hook.remove()
    dtypes = {name: ", ".join(sorted(seen[name])) or "never called" for name in LAYERS}
    dtypes["parameters"] = ", ".join(sorted({str(p.dtype) for p in model.parameters()}))
    out: dict[str, Any] = {
        "losses": torch.tensor(losses, dtype=torch.float64),
        "params": {name: p.detach().clone() for name, p in model.named_parameters()},
        "scales": torch.tensor(scales, dtype=torch.float64),
        "skipped": torch.tensor(skipped, dtype=torch.int64),
        "dtypes": dtypes,
    }
    if inputs.get("benchmark"):
        out["benchmark"] = benchmark(submission, inputs["benchmark"], where)
    return out


def fp32_step(model: MLP, optimizer: torch.optim.Optimizer, x: torch.Tensor, y: torch.Tensor, max_norm: float) -> None:
    """The same step in plain float32: no autocast, no scaler."""
    optimizer.zero_grad(set_to_none=True)
    loss = F.cross_entropy(model(x), y)
    loss.backward()
    torch.nn.utils.clip_grad_norm_(model.parameters(), max_norm)
    optimizer.step()


def benchmark(submission: Any, config: dict[str, Any], where: torch.device) -> dict[str, Any]:
    """Milliseconds per step and peak GPU memory above the parameters and the batch, fp32 against yours."""
    figures = {}
    for mode in ("fp32", "amp"):
        figures[mode] = _bench_one(submission if mode == "amp" else None, config, where)
        if where.type == "cuda":  # the previous mode's model and tensors are gone: give their memory back
            torch.cuda.empty_cache()
    return figures


def _bench_one(submission: Any, config: dict[str, Any], where: torch.device) -> dict[str, float]:
    """One mode: ``submission`` None is the plain float32 step."""
    torch.manual_seed(int(config["seed"]))
    with where:  # built on the GPU: initialising 25M parameters on the rank's one CPU thread took 0.2 s per mode
        model = MLP(config["d_in"], config["hidden"], config["classes"])
    optimizer = torch.optim.SGD(model.parameters(), lr=1e-3, momentum=0.9)
    scaler = torch.amp.GradScaler(where.type)
    x = torch.randn(config["batch"], config["d_in"], device=where)
    y = torch.randint(0, config["classes"], (config["batch"],), device=where)

    def step() -> None:
        if submission is None:
            fp32_step(model, optimizer, x, y, 1.0)
        else:
            submission.amp_train_step(model, optimizer, scaler, x, y, 1.0)

    synchronize(where)
    base = memory(where)  # the parameters and the batch: gradients and momentum count in the peak, as they are used
    for _ in range(2):  # warm up: kernels chosen, autocast's and the optimizer's first allocations made
        step()
    synchronize(where)
    reset_peak(where)
    started = time.perf_counter()
    for _ in range(int(config["repeats"])):
        step()
    synchronize(where)
    elapsed = time.perf_counter() - started
    return {"ms_per_step": 1000.0 * elapsed / int(config["repeats"]), "peak_extra_bytes": float(peak(where) - base)}


def synchronize(where: torch.device) -> None:
    if where.type == "cuda":
        torch.cuda.synchronize(where)


def memory(where: torch.device) -> int:
    return torch.cuda.memory_allocated(where) if where.type == "cuda" else 0


def reset_peak(where: torch.device) -> None:
    if where.type == "cuda":
        torch.cuda.reset_peak_memory_stats(where)


def peak(where: torch.device) -> int:
    return torch.cuda.max_memory_allocated(where) if where.type == "cuda" else 0
