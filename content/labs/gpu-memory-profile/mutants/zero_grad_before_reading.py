# zeroes the gradients (set_to_none) before reading the memory after optimizer.step()
import torch


def profile_memory(make_model, tokens, targets):
    where = tokens.device
    torch.cuda.synchronize(where)
    start = torch.cuda.memory_allocated(where)
    model = make_model().to(where)
    after_model = torch.cuda.memory_allocated(where)
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
    loss = model(tokens, targets)
    after_forward = torch.cuda.memory_allocated(where)
    loss.backward()
    del loss
    after_backward = torch.cuda.memory_allocated(where)
    optimizer.step()
    optimizer.zero_grad(set_to_none=True)
    torch.cuda.synchronize(where)
    after_step = torch.cuda.memory_allocated(where)
    return {
        "parameters": after_model - start,
        "activations": after_forward - after_model,
        "gradients": after_backward - after_model,
        "optimizer_states": after_step - after_backward,
    }


def chapter_formula(num_params, num_trainable):
    return {"parameters": 4 * num_params, "gradients": 4 * num_trainable, "optimizer_states": 8 * num_trainable}
