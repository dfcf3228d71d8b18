"""Fine-tune the pre-trained model of ``task`` with FSDP2 on every rank torchrun starts.

Run as ``torchrun --nproc-per-node=N train.py``: every process runs this whole file as ``__main__``.
The environment holds torchrun's variables (RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT, ...) and the
job's: SEED, CORPUS_SIZE, CHECKPOINT_EVERY, CHECKPOINT_DIR, METRICS_PATH (see the statement).

To do (this starter trains, but on one process's view of the data, with a constant learning rate,
in float32, and it neither checkpoints nor resumes):
  1. shard the model with fully_shard (each block, then the root), bf16 parameters, fp32 reduction;
  2. a DistributedSampler(shuffle=True, seed=SEED) with set_epoch(epoch) at every epoch;
  3. ACCUMULATION micro-batches per optimizer step; the loss logged is the global batch's mean;
  4. AdamW at BASE_LR x WORLD_SIZE, with linear warmup then cosine decay to MIN_LR_RATIO x peak;
  5. a sharded checkpoint every CHECKPOINT_EVERY steps, and a relaunch that resumes from the newest;
  6. rank 0 alone prints and writes METRICS_PATH; the held-out perplexity at the end.
"""

import json
import math
import os

import task
import torch
import torch.distributed as dist
from torch.utils.data import DataLoader, TensorDataset


def main() -> None:
    rank = int(os.environ["RANK"])
    seed = int(os.environ["SEED"])
    dist.init_process_group("gloo")
    model = task.build_model()
    dataset = TensorDataset(task.corpus(seed, int(os.environ["CORPUS_SIZE"])))
    loader = DataLoader(dataset, batch_size=task.LOCAL_BATCH, shuffle=True)
    optimizer = torch.optim.AdamW(model.parameters(), lr=task.BASE_LR, betas=task.BETAS, weight_decay=task.WEIGHT_DECAY)
    log = open(os.environ["METRICS_PATH"], "a")  # noqa: SIM115
    step = 0
    for epoch in range(task.EPOCHS):
        for (batch,) in loader:
            loss = task.loss_fn(model, batch)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            step += 1
            print(f"rank {rank} step {step} epoch {epoch} loss {loss.item():.4f}")
            log.write(json.dumps({"step": step, "loss": loss.item(), "lr": task.BASE_LR}) + "\n")
    with torch.no_grad():
        perplexity = math.exp(task.loss_fn(model, task.held_out(seed)).item())
    log.write(json.dumps({"perplexity": perplexity}) + "\n")
    log.close()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
