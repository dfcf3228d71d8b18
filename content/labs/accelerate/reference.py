"""Trusted, beside checks.py (never mounted): the single-process reference of the accelerate lab, and the
mistakes its advice replays.

One process trains on the global batch of N processes (N times the DataLoaders' batch_size), with the
learning-rate schedule as Accelerate runs it: ``LambdaLR`` over ``len(train_loader) * epochs`` steps of
the DataLoader as written (one process's batches), stepped N times per optimizer step by the prepared
scheduler (``AcceleratedScheduler`` with ``split_batches=False``). A ``Way`` says how a run trains, so
that a wrong way (each process alone on every batch, a schedule counted in other steps) is the same
code with other numbers; a ``Resume`` says what a relaunch restores and which batches it skips.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass
from types import ModuleType
from typing import Any

import torch


@dataclass(frozen=True)
class Job:
    """The settings drawn for one grading (the same at every world size)."""

    seed: int
    train_examples: int
    eval_examples: int
    batch_size: int
    epochs: int
    lr: float


@dataclass(frozen=True)
class Way:
    """How a run trains: examples per optimizer step, LambdaLR's ``total_steps``, scheduler steps per step."""

    batch: int
    schedule_total: int
    schedule_calls: int


@dataclass(frozen=True)
class Resume:
    """A relaunch from the state after ``at`` steps: what it restores, which batches it trains on.

    ``skip``: "consumed", the batches the checkpoint holds are skipped (right); "none", the epoch it
    resumes in starts again from its first batch; "all", every epoch again from the first.
    """

    at: int
    model: bool = True
    optimizer: bool = True
    scheduler: bool = True
    skip: str = "consumed"


def right(job: Job, n: int) -> Way:
    """Accelerate on ``n`` processes: a global batch of n x batch_size, the schedule as written, stepped n times."""
    return Way(job.batch_size * n, job.train_examples // job.batch_size * job.epochs, n)


def steps_per_epoch(job: Job, way: Way) -> int:
    return job.train_examples // way.batch


class _Run:
    """One process training as ``way`` says, on the job's training set, in order (no shuffling)."""

    def __init__(self, task: ModuleType, job: Job, way: Way):
        self.task, self.way = task, way
        train_set, _ = task.datasets(job.seed, job.train_examples, job.eval_examples)
        self.x, self.y = train_set.tensors
        self.model = task.build_model(job.seed)
        self.optimizer = task.make_optimizer(self.model, job.lr)
        self.scheduler = torch.optim.lr_scheduler.LambdaLR(self.optimizer, task.linear_decay(way.schedule_total))

    def step(self, index: int) -> None:
        """One optimizer step on batch ``index`` of an epoch."""
        rows = slice(index * self.way.batch, (index + 1) * self.way.batch)
        loss = self.task.loss_fn(self.model(self.x[rows]), self.y[rows])
        loss.backward()
        self.optimizer.step()
        for _ in range(self.way.schedule_calls):
            self.scheduler.step()
        self.optimizer.zero_grad()

    def params(self) -> dict[str, torch.Tensor]:
        return {name: p.detach().clone() for name, p in self.model.state_dict().items()}


def _plan(per_epoch: int, epochs: int, start: int, skip: str) -> list[int]:
    """The batch index of every optimizer step a run takes from ``start`` steps done."""
    first_epoch = 0 if skip == "all" else start // per_epoch
    first = start % per_epoch if skip == "consumed" else 0
    return [b for e in range(first_epoch, epochs) for b in range(first if e == first_epoch else 0, per_epoch)]


def train(task: ModuleType, job: Job, way: Way, resume: Resume | None = None) -> dict[str, torch.Tensor]:
    """The parameters at the end of training; with ``resume``, of a relaunch from the state after ``resume.at``."""
    per_epoch = steps_per_epoch(job, way)
    run = _Run(task, job, way)
    plan = _plan(per_epoch, job.epochs, 0, "consumed")
    if resume is None:
        for index in plan:
            run.step(index)
        return run.params()
    for index in plan[: resume.at]:
        run.step(index)
    relaunch = _Run(task, job, way)
    if resume.model:
        relaunch.model.load_state_dict(copy.deepcopy(run.model.state_dict()))
    if resume.optimizer:
        relaunch.optimizer.load_state_dict(copy.deepcopy(run.optimizer.state_dict()))
    if resume.scheduler:
        relaunch.scheduler.load_state_dict(copy.deepcopy(run.scheduler.state_dict()))
    for index in _plan(per_epoch, job.epochs, resume.at, resume.skip):
        relaunch.step(index)
    return relaunch.params()


def eval_losses(task: ModuleType, job: Job, params: dict[str, Any]) -> torch.Tensor | None:
    """Each evaluation example's loss under ``params``; None if they do not fit the model."""
    model = task.build_model(job.seed)
    want = model.state_dict()
    if set(params) != set(want) or any(
        type(params[k]) is not torch.Tensor or params[k].shape != v.shape for k, v in want.items()
    ):
        return None
    model.load_state_dict({k: params[k].to(torch.float64) for k in want})
    _, eval_set = task.datasets(job.seed, job.train_examples, job.eval_examples)
    x, y = eval_set.tensors
    with torch.no_grad():
        out: torch.Tensor = task.example_losses(model(x), y)
    return out


def close(want: dict[str, torch.Tensor], got: dict[str, Any], rtol: float) -> bool:
    """``got`` holds every tensor of ``want``, of its shape, within ``rtol`` (relative to the largest value)."""
    for name, w in want.items():
        g = got.get(name)
        if type(g) is not torch.Tensor or g.shape != w.shape:
            return False
        scale = float(w.abs().max()) or 1.0
        if not torch.allclose(g.to(w.dtype), w, rtol=0.0, atol=rtol * scale):
            return False
    return True
