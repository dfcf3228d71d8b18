# backward on the unscaled loss, then scaler.step divides the gradients by the scale once more
import torch
import torch.nn.functional as F


def amp_train_step(model, optimizer, scaler, x, y, max_norm):
    optimizer.zero_grad(set_to_none=True)
    with torch.autocast(device_type=x.device.type, dtype=torch.float16):
        loss = F.cross_entropy(model(x), y)
    loss.backward()
    scaler.unscale_(optimizer)
    torch.nn.utils.clip_grad_norm_(model.parameters(), max_norm)
    scaler.step(optimizer)
    scaler.update()
    return loss.detach()
