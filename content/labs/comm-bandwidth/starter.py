"""Communication bandwidth: benchmark an all-reduce, then fit its latency and bandwidth.

Three functions. The grader's public driver (driver.py) calls them on every rank:

    measure(ic, sizes, warmup, reps)   # on the interconnect of interconnect.py: real gloo all-reduces,
                                       # timed on a virtual clock
    bandwidths(sizes, times, world_size)
    fit(sizes, times, world_size)      # on measurements the grader made up for this rank

Sizes are in bytes, times in seconds, bandwidths in bytes per second. The default process group
(backend gloo) is initialised before this module is imported.
"""

import torch


def measure(ic, sizes, warmup, reps):
    """The time of one all-reduce of each size in ``sizes`` (bytes), in seconds: a list, one per size.

    ``ic`` offers ``ic.all_reduce(tensor)``, ``ic.barrier()`` and ``ic.now()`` (its clock, in seconds). For
    each size: a float32 tensor of ``size // 4`` elements; ``warmup`` untimed all-reduces; then ``reps``
    timed ones, each timed on its own, with the ranks synchronised before it; report the median of the
    ``reps`` times. Every rank runs this, and makes the same calls in the same order.
    """
    x = torch.zeros(sizes[0] // 4, dtype=torch.float32)  # sizes[0] bytes
    # TODO: for each size: `warmup` calls of ic.all_reduce(x), untimed; then `reps` times:
    #       ic.barrier(), start = ic.now(), ic.all_reduce(x), the time ic.now() - start. The median of them.
    raise NotImplementedError(f"measure: {x.numel()} float32 elements to start with; warm up, synchronise, repeat")


def bandwidths(sizes, times, world_size):
    """``(algbw, busbw)``: two lists, bytes per second, one value per size, for an all-reduce on ``world_size`` ranks.

    algbw = size / time; busbw = algbw x 2(N-1)/N (the definition of nccl-tests for all-reduce).
    """
    raise NotImplementedError("bandwidths: algorithm and bus bandwidth")


def fit(sizes, times, world_size):
    """Fit t = alpha + s / beta to the times of an all-reduce on ``world_size`` ranks.

    Returns a dict: ``alpha`` (seconds), ``beta`` (bytes/s: the algorithm bandwidth of large messages),
    ``busbw`` (bytes/s: the bus bandwidth of large messages, beta x 2(N-1)/N) and ``crossover`` (bytes:
    alpha x beta, where the latency alpha equals the transfer time s / beta).
    """
    raise NotImplementedError("fit: alpha, beta, busbw and crossover")
