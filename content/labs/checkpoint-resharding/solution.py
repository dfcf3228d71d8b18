"""Reference solution for checkpoint-resharding (the project's tests only; never shown to students)."""

import torch.distributed.checkpoint as dcp
from torch.distributed.checkpoint.state_dict import get_state_dict, set_state_dict


def save_checkpoint(model, optimizer, path):
    model_state, optim_state = get_state_dict(model, optimizer)
    dcp.save({"model": model_state, "optim": optim_state}, checkpoint_id=path)


def load_checkpoint(model, optimizer, path):
    # get_state_dict gives the state dicts of *this* sharding (a fresh optimizer's state is
    # initialised first), so dcp.load fills each rank's own shards from whatever wrote them.
    model_state, optim_state = get_state_dict(model, optimizer)
    state = {"model": model_state, "optim": optim_state}
    dcp.load(state, checkpoint_id=path)
    set_state_dict(model, optimizer, model_state_dict=state["model"], optim_state_dict=state["optim"])
