# returns the scaled loss (scaler.scale(loss)) instead of the loss
import torch
import torch.nn.functional as F


def amp_train_step(model, optimizer, scaler, x, y, max_norm):
    optimizer.zero_grad(set_to_none=True)
    with torch.autocast(device_type=x.device.type, dtype=torch.float16):
        loss = F.cross_entropy(model(x), y)
    scaled = scaler.scale(loss)
    scaled.backward()
    scaler.unscale_(optimizer)
    torch.nn.utils.clip_grad_norm_(model.parameters(), max_norm)
    scaler.step(optimizer)
    scaler.update()
    return scaled.detach()
