import torch
import torch.nn.functional as F


def amp_train_step(model, optimizer, scaler, x, y, max_norm):
    optimizer.zero_grad(set_to_none=True)
    with torch.autocast(device_type=x.device.type, dtype=torch.float16):
        loss = F.cross_entropy(model(x), y)
    scaler.scale(loss).backward()
    scaler.unscale_(optimizer)  # clip the true gradients, not the scaled ones
    torch.nn.utils.clip_grad_norm_(model.parameters(), max_norm)
    scaler.step(optimizer)  # skipped when a gradient is inf or NaN
    scaler.update()
    return loss.detach()
