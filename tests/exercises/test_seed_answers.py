"""Every answer part's value, recomputed here from its exercise's givens.

The formulas below are written from the exercise texts (and the assumptions each prompt
states), not from the stored values: a wrong value in content/ fails here, and so does a
part that has no recomputation.
"""

from __future__ import annotations

import math

import pytest

from app.content.models import ContentTree
from app.exercises.answers import is_correct

GB = 1e9  # the prompts say GB = 10^9 bytes, MB = 10^6
MB = 1e6
A100_PEAK = 312e12  # FLOP/s, BF16 dense
ON_DEMAND = 3.50  # $/GPU-hour, A100 80GB (26.20, 26.21 option A, 35.22)
SPOT = ON_DEMAND * (1 - 0.65)


def ring_ms(n: int, size_bytes: float, alpha_s: float, beta: float) -> float:
    return (2 * (n - 1) * alpha_s + 2 * (n - 1) / n * size_bytes / beta) * 1000


def training_hours(params: float, tokens: float, gpus: int, mfu: float) -> float:
    return 6 * params * tokens / (gpus * A100_PEAK * mfu) / 3600


def smallest_m_below(n: int, limit: float) -> int:
    m = 1
    while (n - 1) / (n + m - 1) >= limit:
        m += 1
    return m


def cost_26_20(params: float, tokens: float, gpus: int, mfu: float) -> dict[str, float]:
    hours = training_hours(params, tokens, gpus, mfu)
    on_demand = gpus * hours * ON_DEMAND
    spot = gpus * hours * SPOT
    per_preemption = gpus * 0.5 * SPOT  # 30 minutes lost on every GPU, paid at the spot price
    # The break-even asked for is a count: the first number of preemptions at which spot costs more.
    equal_at = (on_demand - spot) / per_preemption
    return {"on-demand": on_demand, "spot": spot, "break-even": math.floor(equal_at) + 1}


def expected() -> dict[tuple[str, str], float]:
    out: dict[tuple[str, str], float] = {}

    # 26.1: ResNet-50, 1.28M images, 8 GPUs x 256, 100 MB gradients, alpha 10 us, 250 ms step.
    t8 = ring_ms(8, 100 * MB, 10e-6, 50 * GB)
    t64 = ring_ms(64, 100 * MB, 10e-6, 12.5 * GB)
    out |= {("ex-26-1", "a-global-batch"): 8 * 256, ("ex-26-1", "a-sync-steps"): 1_280_000 / (8 * 256),
            ("ex-26-1", "b-allreduce-time"): t8, ("ex-26-1", "b-fraction"): t8 / 250 * 100,
            ("ex-26-1", "c-allreduce-time"): t64, ("ex-26-1", "c-fraction"): t64 / 250 * 100}  # fmt: skip

    # 26.4: compute 180, all-reduce 45, data 25, other 10 ms; 2.8x on 4 GPUs.
    step, serial = 180 + 45 + 25 + 10, 10
    out |= {("ex-26-4", "b-amdahl-4"): step / (serial + (step - serial) / 4),
            ("ex-26-4", "b-amdahl-limit"): step / serial, ("ex-26-4", "b-efficiency"): 2.8 / 4 * 100}  # fmt: skip

    # 26.6: bubble (N-1)/(N+M-1) below 10%.
    out |= {("ex-26-6", f"b-n{n}"): smallest_m_below(n, 0.10) for n in (4, 8, 16)}

    # 26.7: 32 heads on 4 GPUs.
    out[("ex-26-7", "a-heads-per-gpu")] = 32 / 4

    # 26.9: square FP16 matmul, intensity 2d^3 / (3 d^2 * 2 bytes); ridge 312 TFLOP/s / 2.0 TB/s.
    ridge = 312e12 / 2.0e12
    out[("ex-26-9", "b-ridge-dimension")] = next(d for d in range(1, 10_000) if 2 * d**3 / (3 * d * d * 2) >= ridge)

    # 26.13: 48 layers, memory L/k + k; recomputation 1 - 1/k of a forward pass (backward = 2 forwards);
    # the batch doubles, halving the steps, once 2(L/k + k) fits in the 48 layers' memory.
    def epoch_time(k: int) -> float:
        return (3 + (1 - 1 / k)) * (0.5 if 2 * (48 / k + k) <= 48 else 1)

    memory_k = min((k / 1000 for k in range(1000, 48_000)), key=lambda k: 48 / k + k)
    out |= {("ex-26-13", "b-sqrt-interval"): min(range(1, 49), key=epoch_time),
            ("ex-26-13", "b-min-memory"): 48 / memory_k + memory_k}  # fmt: skip

    # 26.15: linear scaling rule.
    rows = [(256, 1e-3, 4096), (64, 5e-4, 2048), (512, 3e-4, 32768)]
    out |= {("ex-26-15", f"row-{i}"): lr * target / base for i, (base, lr, target) in enumerate(rows, 1)}

    # 26.16: B_crit 4096 over 16 and 128 GPUs.
    out |= {("ex-26-16", "c-local-16"): 4096 / 16, ("ex-26-16", "c-local-128"): 4096 / 128}

    # 26.18: 7B parameters, FP32 weights and gradients, Adam m and v in FP32, 8 GPUs.
    p, n = 7e9, 8
    w, g, opt = 4, 4, 8
    per_gpu = {"a-ddp": w + g + opt, "a-zero1": w + g + opt / n, "a-zero2": w + (g + opt) / n,
               "a-zero3": (w + g + opt) / n}  # fmt: skip
    out |= {("ex-26-18", k): b * p / GB for k, b in per_gpu.items()}
    out[("ex-26-18", "b-stage")] = next(
        stage for stage, key in ((0, "a-ddp"), (1, "a-zero1"), (2, "a-zero2"), (3, "a-zero3"))
        if per_gpu[key] * p / GB + 15 <= 40
    )  # fmt: skip

    # 26.20: three models on A100s.
    for name, args in (("bert", (110e6, 3.3e9, 8, 0.45)), ("gpt2", (345e6, 40e9, 16, 0.42)),
                       ("vision", (3e9, 500e9, 64, 0.38))):  # fmt: skip
        out |= {("ex-26-20", f"{name}-{k}"): v for k, v in cost_26_20(*args).items()}

    # 26.21: 1e21 FLOPs; A = 32 GPUs at $3.50, MFU 0.45; B = 128 spot GPUs at $1.10, MFU 0.35,
    # 2 preemptions per day of compute, 1 hour each.
    hours_a = 1e21 / (32 * A100_PEAK * 0.45) / 3600
    compute_b = 1e21 / (128 * A100_PEAK * 0.35) / 3600
    hours_b = compute_b + 2 * compute_b / 24 * 1
    useful_b = compute_b / hours_b
    out |= {("ex-26-21", "a-time-a"): hours_a, ("ex-26-21", "a-cost-a"): 32 * hours_a * 3.50,
            ("ex-26-21", "a-time-b"): hours_b, ("ex-26-21", "a-cost-b"): 128 * hours_b * 1.10,
            ("ex-26-21", "b-flops-a"): 50_000 / 3.50 * 3600 * A100_PEAK * 0.45,
            ("ex-26-21", "b-flops-b"): 50_000 / 1.10 * useful_b * 3600 * A100_PEAK * 0.35}  # fmt: skip

    # 26.22: a 15 GB checkpoint at 3 GB/s, 1 GB/s and 200 MB/s.
    out |= {("ex-26-22", "c-nvme"): 15 * GB / (3 * GB), ("ex-26-22", "c-nas"): 15 * GB / GB,
            ("ex-26-22", "c-object"): 15 * GB / (200 * MB)}  # fmt: skip

    # 26.27: D = 20P, C = 6PD.
    out |= {("ex-26-27", "a-coefficient"): 6 * 20, ("ex-26-27", "a-70b"): 6 * 70e9 * (20 * 70e9)}

    # 35.2: ring all-reduce volume 2(N-1)/N D; naive root gathers and broadcasts (N-1)D each way.
    def ring_factor(n: int) -> float:
        return 2 * (n - 1) / n

    out |= {("ex-35-2", "factor-n4"): ring_factor(4), ("ex-35-2", "factor-n8"): ring_factor(8),
            ("ex-35-2", "bytes-100mb"): ring_factor(4) * 100,
            ("ex-35-2", "naive-ratio"): (2 * (4 - 1)) / (2 * ring_factor(4))}  # fmt: skip

    # 35.6, 35.7
    out[("ex-35-6", "accumulation-steps")] = 256 / 32
    out[("ex-35-7", "lr-factor")] = 4

    # 35.9: 2 stages, M micro-batches: efficiency M / (M + N - 1).
    out |= {("ex-35-9", f"m{m}"): m / (m + 2 - 1) * 100 for m in (1, 2, 4, 8)}

    # 35.18: IEEE-style limits from the bit layouts (exponent bits, mantissa bits).
    def limits(exp_bits: int, man_bits: int) -> tuple[float, float, float]:
        bias = 2 ** (exp_bits - 1) - 1
        largest = (2 - 2.0**-man_bits) * 2.0 ** (2**exp_bits - 2 - bias)
        return largest, 2.0 ** (1 - bias), 2.0**-man_bits

    for name, layout in (("fp16", (5, 10)), ("bf16", (8, 7))):
        largest, smallest, eps = limits(*layout)
        out |= {("ex-35-18", f"{name}-max"): largest, ("ex-35-18", f"{name}-min-normal"): smallest,
                ("ex-35-18", f"{name}-epsilon"): eps}  # fmt: skip

    # 35.22: 8 A100s x 24 h; 16 x 12; 32 A10Gs x 48 at $1.00; spot at 65% off.
    out |= {("ex-35-22", "base-gpu-hours"): 8 * 24, ("ex-35-22", "a-gpu-hours"): 16 * 12,
            ("ex-35-22", "a-cost"): 16 * 12 * ON_DEMAND, ("ex-35-22", "b-gpu-hours"): 32 * 48,
            ("ex-35-22", "b-cost"): 32 * 48 * 1.00, ("ex-35-22", "c-spot-cost"): 8 * 24 * SPOT}  # fmt: skip
    return out


EXPECTED = expected()


def test_the_formulas_agree_with_known_figures() -> None:
    # Anchors that do not come from our content: the FP16 maximum, BF16 = FP32 range, sqrt(48).
    assert EXPECTED[("ex-35-18", "fp16-max")] == 65504
    assert EXPECTED[("ex-35-18", "bf16-min-normal")] == 2.0**-126
    assert EXPECTED[("ex-26-13", "b-min-memory")] == pytest.approx(2 * math.sqrt(48), abs=1e-3)
    assert EXPECTED[("ex-26-6", "b-n4")] == 28


def test_every_part_is_recomputed_and_matches(content_tree: ContentTree) -> None:
    parts = {(e.id, p.id): p for s in content_tree.exercise_sets for e in s.exercises for p in e.parts}
    assert set(parts) == set(EXPECTED), "add a recomputation for every new part (and remove old ones)"
    for key, part in parts.items():
        computed = EXPECTED[key]
        # The stored value is the computed one, rounded for display at most to 0.2%...
        assert part.value == pytest.approx(computed, rel=2e-3), key
        # ...and the exact answer, as a student would type it, is accepted.
        assert is_correct(f"{computed!r}", value=part.value, tolerance=part.tolerance, unit=part.unit), key
