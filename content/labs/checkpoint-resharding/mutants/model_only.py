# saves and loads only the model's state: AdamW starts again with no moments, so the next step differs

import torch.distributed.checkpoint as dcp
from torch.distributed.checkpoint.state_dict import get_model_state_dict, set_model_state_dict


def save_checkpoint(model, optimizer, path):
    dcp.save({"model": get_model_state_dict(model)}, checkpoint_id=path)


def load_checkpoint(model, optimizer, path):
    state = {"model": get_model_state_dict(model)}
    dcp.load(state, checkpoint_id=path)
    set_model_state_dict(model, state["model"])
