# uses the GradScaler but never autocasts: the whole step runs in float32
import torch
import torch.nn.functional as F


def amp_train_step(model, optimizer, scaler, x, y, max_norm):
    optimizer.zero_grad(set_to_none=True)
    loss = F.cross_entropy(model(x), y)
    scaler.scale(loss).backward()
    scaler.unscale_(optimizer)
    torch.nn.utils.clip_grad_norm_(model.parameters(), max_norm)
    scaler.step(optimizer)
    scaler.update()
    return loss.detach()
