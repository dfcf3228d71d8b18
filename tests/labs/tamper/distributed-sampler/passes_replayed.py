"""Wraps the driver's ``sample`` so that the second pass of each epoch and the fresh sampler's passes
report the first pass's indices, which a sampler that draws a new permutation on every pass would
never give again. Imitates: generator_in_init."""

import driver

_sample = driver.sample


def _replayed(submission, inputs):
    out = _sample(submission, inputs)
    for config in out["configs"]:
        config["again"] = [list(p) for p in config["epochs"]]
        config["fresh"] = [list(p) for p in config["epochs"]]
    return out


driver.sample = _replayed
