"""Trusted helper for overlap-ddp's checks (never mounted in a rank): the bucket rule, and the framing the
kernel counts for a bucketing, from the model's parameter sizes alone (checks.py says how gloo frames an
all-reduce: 576 (N-1) bytes per large one, less for a tiny one, ``framed``).
"""

from __future__ import annotations

from typing import Any

from labs.authoring import load_public

DRIVER = load_public(__file__, "driver")


def framed(elements: int, world_size: int) -> float:
    """The framing of one all-reduce of ``elements`` elements, as a share of a large one's (f above)."""
    chunk = -(-elements // (2 * world_size))
    return -(-elements // chunk) / (2 * world_size)


def assign(sizes: list[tuple[str, int]], cap: int, *, never_over: bool) -> list[list[str]]:
    """Buckets of parameter names, walking ``sizes`` (name, bytes) in reverse parameter order.

    DDP's rule (``never_over=False``): add each parameter to the open bucket, and close the bucket
    as soon as it holds at least ``cap`` bytes. The other accepted rule (``never_over=True``):
    close the open bucket first if the parameter would take it over ``cap``.
    """
    buckets: list[list[str]] = [[]]
    size = 0
    for name, nbytes in reversed(sizes):
        if never_over and buckets[-1] and size + nbytes > cap:
            buckets.append([])
            size = 0
        buckets[-1].append(name)
        size += nbytes
        if size >= cap:
            buckets.append([])
            size = 0
    return [b for b in buckets if b]


def candidates(inputs: dict[str, Any]) -> list[list[list[str]]]:
    """The accepted bucket assignments for these inputs: DDP's rule first."""
    model = DRIVER.build_model(0, list(inputs["dims"]))
    sizes = [(n, p.numel() * p.element_size()) for n, p in model.named_parameters()]
    cap = int(inputs["bucket_cap_bytes"])
    out = [assign(sizes, cap, never_over=False)]
    other = assign(sizes, cap, never_over=True)
    return out + ([other] if other != out[0] else [])


def framing(buckets: list[list[str]], nbytes: dict[str, int], world_size: int) -> float:
    """The framing per step of one all-reduce per bucket, in large all-reduces (every parameter is float64)."""
    return sum(framed(sum(nbytes[n] for n in b) // 8, world_size) for b in buckets)


def mistakes(inputs: dict[str, Any], nbytes: dict[str, int], world_size: int) -> dict[str, float]:
    """The framing per step (in large all-reduces) that some usual mistakes give, by what the mistake is."""
    sizes, cap = list(nbytes.items()), int(inputs["bucket_cap_bytes"])
    elements = [(n, b // 8) for n, b in sizes]  # every parameter is float64
    bucketings = {
        "one bucket for the whole model": [list(nbytes)],
        "comparing the cap with numel() instead of bytes": assign(elements, cap, never_over=False),
        "filling the buckets in model.parameters() order": assign(sizes[::-1], cap, never_over=False),
        "one all-reduce per parameter": [[n] for n in nbytes],
    }
    return {what: framing(buckets, nbytes, world_size) for what, buckets in bucketings.items()}
