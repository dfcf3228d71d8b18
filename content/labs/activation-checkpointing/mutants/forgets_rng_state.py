# own autograd Function that recomputes without restoring the random state: other dropout masks
import torch


class Segment(torch.autograd.Function):
    @staticmethod
    def forward(ctx, run, x, *params):
        ctx.run = run
        ctx.save_for_backward(x, *params)
        with torch.no_grad():
            return run(x)

    @staticmethod
    def backward(ctx, grad):
        x, *params = ctx.saved_tensors
        with torch.enable_grad():
            h = x.detach().requires_grad_()
            y = ctx.run(h)  # the dropout masks drawn now are not the forward's
        grads = torch.autograd.grad(y, [h, *params], grad, allow_unused=True)
        return (None, *grads)


def checkpointed_forward(blocks, x, segments):
    size = len(blocks) // segments
    for start in range(0, len(blocks), size):
        part = list(blocks[start : start + size])

        def run(h, part=part):
            for block in part:
                h = block(h)
            return h

        x = Segment.apply(run, x, *[p for b in part for p in b.parameters()])
    return x
