# every rank torch.saves its own shards and loads the file with its own rank number: 2 ranks read
# only the first 2 of the 4 files and never reshard

import torch
import torch.distributed as dist


def _local(tree):
    if isinstance(tree, dict):
        return {k: _local(v) for k, v in tree.items()}
    return tree.to_local() if hasattr(tree, "to_local") else tree


def save_checkpoint(model, optimizer, path):
    torch.save(_local(model.state_dict()), f"{path}/model-{dist.get_rank()}.pt")
    torch.save(_local(optimizer.state_dict()), f"{path}/optim-{dist.get_rank()}.pt")


def load_checkpoint(model, optimizer, path):
    model_state = torch.load(f"{path}/model-{dist.get_rank()}.pt")
    with torch.no_grad():
        for name, p in model.named_parameters():
            local = p.to_local()
            n = min(local.shape[0], model_state[name].shape[0])
            local[:n].copy_(model_state[name][:n])
    optimizer.load_state_dict(torch.load(f"{path}/optim-{dist.get_rank()}.pt"))
