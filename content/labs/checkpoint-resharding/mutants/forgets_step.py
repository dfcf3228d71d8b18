# saves the model and both Adam moments by parameter name but not the step count: the restored
# optimizer counts from 0 again, so the next step's bias correction is wrong

import torch
import torch.distributed.checkpoint as dcp


def _moments(model, optimizer):
    out = {}
    for name, p in model.named_parameters():
        state = optimizer.state.get(p) or {"exp_avg": torch.zeros_like(p), "exp_avg_sq": torch.zeros_like(p)}
        out[name] = {"exp_avg": state["exp_avg"], "exp_avg_sq": state["exp_avg_sq"]}
    return out


def save_checkpoint(model, optimizer, path):
    dcp.save({"model": model.state_dict(), "moments": _moments(model, optimizer)}, checkpoint_id=path)


def load_checkpoint(model, optimizer, path):
    state = {"model": model.state_dict(), "moments": _moments(model, optimizer)}
    dcp.load(state, checkpoint_id=path)
    model.load_state_dict(state["model"])
    for name, p in model.named_parameters():
        optimizer.state[p] = {"step": torch.tensor(0.0), **state["moments"][name]}
