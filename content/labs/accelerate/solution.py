"""The training script rewritten with HuggingFace Accelerate: one file for one process and for N."""

import task
import torch
from accelerate import Accelerator
from torch.utils.data import DataLoader


def main() -> None:
    cfg = task.settings()
    accelerator = Accelerator()  # the launcher's environment says how many processes, and on which device
    train_set, eval_set = task.datasets(cfg.seed, cfg.train_examples, cfg.eval_examples)
    model = task.build_model(cfg.seed)
    optimizer = task.make_optimizer(model, cfg.lr)
    train_loader = DataLoader(train_set, batch_size=cfg.batch_size)
    eval_loader = DataLoader(eval_set, batch_size=cfg.batch_size)
    # Counted in batches of one process, before prepare: the prepared scheduler steps once per process
    # at each optimizer step, so the schedule ends with the training whatever the number of processes.
    total_steps = len(train_loader) * cfg.epochs
    scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, task.linear_decay(total_steps))
    model, optimizer, train_loader, eval_loader, scheduler = accelerator.prepare(
        model, optimizer, train_loader, eval_loader, scheduler
    )

    step = 0
    if cfg.resume:
        accelerator.load_state(cfg.checkpoint_dir)  # model, optimizer, scheduler, random states
        step = cfg.save_at

    steps_per_epoch = len(train_loader)  # prepared: the steps of one epoch on this many processes
    for epoch in range(step // steps_per_epoch, cfg.epochs):
        batches = train_loader
        if epoch == step // steps_per_epoch and step % steps_per_epoch:
            batches = accelerator.skip_first_batches(train_loader, step % steps_per_epoch)
        model.train()
        for x, y in batches:
            loss = task.loss_fn(model(x), y)
            accelerator.backward(loss)
            optimizer.step()
            scheduler.step()
            optimizer.zero_grad()
            step += 1
            if step == cfg.save_at and not cfg.resume:
                accelerator.save_state(cfg.checkpoint_dir)

    model.eval()
    losses = []
    with torch.no_grad():
        for x, y in eval_loader:
            losses.append(accelerator.gather_for_metrics(task.example_losses(model(x), y)))
    result = {"model": accelerator.get_state_dict(model), "eval_losses": torch.cat(losses)}
    accelerator.save(result, cfg.result_path)  # on the main process only
    accelerator.end_training()


if __name__ == "__main__":
    main()
