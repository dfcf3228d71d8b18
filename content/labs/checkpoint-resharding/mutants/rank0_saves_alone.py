# only rank 0 saves (dcp.save with no_dist=True, so nobody waits for the others): the checkpoint
# holds rank 0's shards alone, and the rest of every tensor is missing when 2 ranks load it

import torch.distributed as dist
import torch.distributed.checkpoint as dcp
from torch.distributed.checkpoint.state_dict import get_state_dict, set_state_dict


def save_checkpoint(model, optimizer, path):
    model_state, optim_state = get_state_dict(model, optimizer)
    if dist.get_rank() == 0:
        dcp.save({"model": model_state, "optim": optim_state}, checkpoint_id=path, no_dist=True)


def load_checkpoint(model, optimizer, path):
    model_state, optim_state = get_state_dict(model, optimizer)
    state = {"model": model_state, "optim": optim_state}
    dcp.load(state, checkpoint_id=path)
    set_state_dict(model, optimizer, model_state_dict=state["model"], optim_state_dict=state["optim"])
