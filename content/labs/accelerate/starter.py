"""A single-process training script: rewrite it with HuggingFace Accelerate.

As it is, it trains on one process: run on N processes, each would train alone on every batch.
Rewrite it so that the same file runs unchanged as ``python train.py`` (one process) and as
``accelerate launch --cpu --num_processes N train.py`` (N processes, data parallel), with
``accelerate.Accelerator``:

  1. ``accelerator = Accelerator()``; ``accelerator.prepare(...)`` the model, the optimizer, both
     DataLoaders and the scheduler (keep the DataLoaders' ``batch_size``: it is the batch of one
     process, so N processes train on N times as many examples a step);
  2. ``accelerator.backward(loss)``;
  3. the evaluation: every process evaluates its share of the evaluation set, and
     ``accelerator.gather_for_metrics`` brings the losses together, each example once;
  4. the checkpoint: ``accelerator.save_state(cfg.checkpoint_dir)`` after ``cfg.save_at`` steps,
     and a relaunch (``cfg.resume``) ``accelerator.load_state(cfg.checkpoint_dir)``, then carries on
     with the batches that come after the ones already trained on (``accelerator.skip_first_batches``);
  5. the main process saves the unwrapped model's state_dict and the evaluation losses to
     ``cfg.result_path``.

The statement says exactly what is graded.
"""

import itertools
import os

import task
import torch
from torch.utils.data import DataLoader


def main() -> None:
    cfg = task.settings()
    train_set, eval_set = task.datasets(cfg.seed, cfg.train_examples, cfg.eval_examples)
    model = task.build_model(cfg.seed)
    optimizer = task.make_optimizer(model, cfg.lr)
    train_loader = DataLoader(train_set, batch_size=cfg.batch_size)
    eval_loader = DataLoader(eval_set, batch_size=cfg.batch_size)
    total_steps = len(train_loader) * cfg.epochs
    scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, task.linear_decay(total_steps))
    checkpoint = os.path.join(cfg.checkpoint_dir, "state.pt")

    step = 0
    if cfg.resume:
        state = torch.load(checkpoint, weights_only=True)
        model.load_state_dict(state["model"])
        optimizer.load_state_dict(state["optimizer"])
        scheduler.load_state_dict(state["scheduler"])
        step = state["step"]

    steps_per_epoch = len(train_loader)
    for epoch in range(step // steps_per_epoch, cfg.epochs):
        batches = iter(train_loader)
        if epoch == step // steps_per_epoch:  # the epoch a relaunch resumes in: skip the batches already done
            batches = itertools.islice(batches, step % steps_per_epoch, None)
        model.train()
        for x, y in batches:
            loss = task.loss_fn(model(x), y)
            loss.backward()
            optimizer.step()
            scheduler.step()
            optimizer.zero_grad()
            step += 1
            if step == cfg.save_at and not cfg.resume:
                os.makedirs(cfg.checkpoint_dir, exist_ok=True)
                state = {
                    "model": model.state_dict(),
                    "optimizer": optimizer.state_dict(),
                    "scheduler": scheduler.state_dict(),
                    "step": step,
                }
                torch.save(state, checkpoint)

    model.eval()
    losses = []
    with torch.no_grad():
        for x, y in eval_loader:
            losses.append(task.example_losses(model(x), y))
    torch.save({"model": model.state_dict(), "eval_losses": torch.cat(losses)}, cfg.result_path)


if __name__ == "__main__":
    main()
