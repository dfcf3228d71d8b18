"""An honest wrong distributed-finetune: AdamW keeps its default betas (not task.BETAS), and a relaunch saves
checkpoints but never loads one (it trains again from step 1)."""

import json
import math
import os

import task
import torch
import torch.distributed as dist
import torch.distributed.checkpoint as dcp
from torch.distributed.checkpoint.state_dict import get_state_dict
from torch.distributed.fsdp import MixedPrecisionPolicy, fully_shard
from torch.utils.data import DataLoader, DistributedSampler, TensorDataset


def schedule(total: int):
    """The learning rate's factor at optimizer step ``i`` (0-based): linear warmup, then cosine to the floor."""

    def factor(i: int) -> float:
        if i < task.WARMUP_STEPS:
            return (i + 1) / task.WARMUP_STEPS
        progress = (i - task.WARMUP_STEPS) / max(1, total - 1 - task.WARMUP_STEPS)
        return task.MIN_LR_RATIO + (1 - task.MIN_LR_RATIO) * 0.5 * (1 + math.cos(math.pi * progress))

    return factor


def main() -> None:
    rank, world_size = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    seed, every = int(os.environ["SEED"]), int(os.environ["CHECKPOINT_EVERY"])
    folder, metrics = os.environ["CHECKPOINT_DIR"], os.environ["METRICS_PATH"]
    dist.init_process_group("gloo")

    model = task.build_model()
    policy = MixedPrecisionPolicy(param_dtype=torch.bfloat16, reduce_dtype=torch.float32)
    for block in model.blocks:
        fully_shard(block, mp_policy=policy)
    fully_shard(model, mp_policy=policy)

    dataset = TensorDataset(task.corpus(seed, int(os.environ["CORPUS_SIZE"])))
    sampler = DistributedSampler(dataset, num_replicas=world_size, rank=rank, shuffle=True, seed=seed)
    loader = DataLoader(dataset, batch_size=task.LOCAL_BATCH, sampler=sampler)
    steps_per_epoch = len(loader) // task.ACCUMULATION
    total = steps_per_epoch * task.EPOCHS

    peak = task.BASE_LR * world_size  # linear scaling: the global batch grows with the world size
    optimizer = torch.optim.AdamW(model.parameters(), lr=peak, weight_decay=task.WEIGHT_DECAY)
    scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, schedule(total))

    step = 0
    log = open(metrics, "a") if rank == 0 else None  # noqa: SIM115 (closed after the perplexity)
    for epoch in range(step // steps_per_epoch, task.EPOCHS):
        sampler.set_epoch(epoch)
        batches = iter(loader)
        for _ in range(step % steps_per_epoch * task.ACCUMULATION):  # the micro-batches already trained on
            next(batches)
        while step < (epoch + 1) * steps_per_epoch:
            total_loss = torch.zeros(())
            for _ in range(task.ACCUMULATION):
                (batch,) = next(batches)
                loss = task.loss_fn(model, batch) / task.ACCUMULATION
                loss.backward()
                total_loss += loss.detach()
            lr = scheduler.get_last_lr()[0]
            optimizer.step()
            scheduler.step()
            optimizer.zero_grad()
            step += 1
            dist.all_reduce(total_loss)
            loss_value = total_loss.item() / world_size
            if log is not None:
                print(f"step {step} epoch {epoch} loss {loss_value:.4f} lr {lr:.6f}", flush=True)
                log.write(json.dumps({"step": step, "loss": loss_value, "lr": lr}) + "\n")
                log.flush()
            if step % every == 0:
                model_state, optim_state = get_state_dict(model, optimizer)
                state = {"model": model_state, "optim": optim_state, "scheduler": scheduler.state_dict(), "step": step}
                dcp.save(state, checkpoint_id=os.path.join(folder, f"step-{step}"))

    model.eval()
    with torch.no_grad():
        perplexity = math.exp(task.loss_fn(model, task.held_out(seed)).item())
    if log is not None:
        print(f"done: held-out perplexity {perplexity:.4f}", flush=True)
        log.write(json.dumps({"perplexity": perplexity}) + "\n")
        log.close()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
