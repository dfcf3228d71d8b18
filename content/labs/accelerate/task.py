"""The training task of the accelerate lab (public): the job's settings, the data, the model, the losses.

Import it in your script (``import task``). Everything here is deterministic: the data and the initial
weights come from ``SEED``, so that every process, and every launch of the job, builds the same ones.
The grader computes its reference with these same functions, in one process.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass

import torch
from torch.utils.data import TensorDataset

DIMS = (6, 16, 3)  # Linear 6 -> 16, Tanh, Linear 16 -> 3, float64
MOMENTUM = 0.9


@dataclass(frozen=True)
class Settings:
    """One launch of the job, as the launcher's environment gives it (``settings()``)."""

    seed: int  # the data and the initial weights
    train_examples: int
    eval_examples: int
    batch_size: int  # the DataLoaders' batch_size: the batch of ONE process
    epochs: int
    lr: float  # the learning rate before the schedule
    save_at: int  # after this many optimizer steps the launch saves its state (save_state)
    resume: bool  # a relaunch: load the saved state and carry on from step save_at
    checkpoint_dir: str  # the folder save_state writes and load_state reads: shared by every process
    result_path: str  # where the main process saves {"model": ..., "eval_losses": ...}


def settings() -> Settings:
    """The settings of this launch, from the environment (``SEED``, ``TRAIN_EXAMPLES``, ... ``RESULT_PATH``)."""
    env = os.environ
    return Settings(
        seed=int(env["SEED"]),
        train_examples=int(env["TRAIN_EXAMPLES"]),
        eval_examples=int(env["EVAL_EXAMPLES"]),
        batch_size=int(env["BATCH_SIZE"]),
        epochs=int(env["EPOCHS"]),
        lr=float(env["LR"]),
        save_at=int(env["SAVE_AT"]),
        resume=env.get("RESUME", "0") == "1",
        checkpoint_dir=env["CHECKPOINT_DIR"],
        result_path=env["RESULT_PATH"],
    )


def datasets(seed: int, train_examples: int, eval_examples: int) -> tuple[TensorDataset, TensorDataset]:
    """The training set and the evaluation set: inputs x (float64, 6 features), targets tanh(x W) (3 values)."""
    gen = torch.Generator().manual_seed(seed)
    teacher = torch.randn(DIMS[0], DIMS[-1], generator=gen, dtype=torch.float64)
    sets = []
    for n in (train_examples, eval_examples):
        x = torch.randn(n, DIMS[0], generator=gen, dtype=torch.float64)
        sets.append(TensorDataset(x, torch.tanh(x @ teacher)))
    return sets[0], sets[1]


def build_model(seed: int) -> torch.nn.Sequential:
    """The float64 MLP ``Linear(6, 16), Tanh, Linear(16, 3)``, its initial weights drawn from ``seed``."""
    gen = torch.Generator().manual_seed(seed + 1)
    model = torch.nn.Sequential(
        torch.nn.Linear(DIMS[0], DIMS[1], dtype=torch.float64),
        torch.nn.Tanh(),
        torch.nn.Linear(DIMS[1], DIMS[2], dtype=torch.float64),
    )
    with torch.no_grad():
        for p in model.parameters():
            p.copy_((torch.rand(p.shape, generator=gen, dtype=torch.float64) - 0.5) * 0.8)
    return model


def make_optimizer(model: torch.nn.Module, lr: float) -> torch.optim.SGD:
    """SGD with momentum 0.9: its momentum buffers are state that a checkpoint must keep."""
    return torch.optim.SGD(model.parameters(), lr=lr, momentum=MOMENTUM)


def linear_decay(total_steps: int) -> Callable[[int], float]:
    """The factor of ``LambdaLR``: from 1 at step 0 down to 0 at step ``total_steps`` (and 0 after it)."""
    return lambda step: max(0.0, 1.0 - step / total_steps)


def loss_fn(prediction: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
    """The training loss: the mean squared error over every element of the batch."""
    return ((prediction - target) ** 2).mean()


def example_losses(prediction: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
    """The evaluation's loss of each example (its mean squared error): one value per row."""
    return ((prediction - target) ** 2).mean(dim=1)
