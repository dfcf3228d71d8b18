# gathers the whole state and saves it from rank 0 with torch.save, then loads the full tensors
# into the sharded model as they are: nothing is sharded on disk and nothing is resharded on load

import torch
import torch.distributed as dist
from torch.distributed.checkpoint.state_dict import StateDictOptions, get_state_dict


def save_checkpoint(model, optimizer, path):
    options = StateDictOptions(full_state_dict=True, cpu_offload=True)
    model_state, optim_state = get_state_dict(model, optimizer, options=options)
    if dist.get_rank() == 0:
        torch.save({"model": model_state, "optim": optim_state}, f"{path}/checkpoint.pt")
    dist.barrier()


def load_checkpoint(model, optimizer, path):
    state = torch.load(f"{path}/checkpoint.pt", weights_only=False)
    model.load_state_dict(state["model"])
    optimizer.load_state_dict(state["optim"])
