"""Corrected answer parts: each corrected value, tolerance and prompt, recomputed and checked.

35.18 (BF16 limits), 26.1 (c), 26.9 (b), 26.13 (b) and the 26.20 break-even parts. The seeds
print no answers, so these are corrections of our own parts: where the marking changed (a value
or a tolerance) the part carries an erratum with ``in_source: false`` naming what the site
accepted before, which students see and which re-scores their answers; the checks here use the
real answer checker.
"""

from __future__ import annotations

import math
import struct

import pytest

from app.content.models import AnswerPart, ContentTree
from app.exercises.answers import is_correct

A100_PEAK = 312e12  # FLOP/s, BF16 dense
ON_DEMAND = 3.50  # $/GPU-hour
SPOT = ON_DEMAND * (1 - 0.65)


@pytest.fixture(scope="module")
def parts(content_tree: ContentTree) -> dict[tuple[str, str], AnswerPart]:
    return {(e.id, p.id): p for s in content_tree.exercise_sets for e in s.exercises for p in e.parts}


def accepts(part: AnswerPart, answer: str) -> bool:
    return is_correct(answer, value=part.value, tolerance=part.tolerance, unit=part.unit)


def bf16(bits: int) -> float:
    """The BF16 number with these 16 bits: the top half of an FP32."""
    return struct.unpack(">f", struct.pack(">I", bits << 16))[0]


# Every part whose marking changed: (exercise, part) -> (field, what the site accepted before).
CORRECTED_MARKING = {
    ("ex-35-18", "bf16-max"): ("tolerance", "0.1%"),
    ("ex-35-18", "bf16-min-normal"): ("tolerance", "0.1%"),
    ("ex-26-13", "b-sqrt-interval"): ("value", "6.928"),
    ("ex-26-20", "bert-break-even"): ("value", "2.0"),
    ("ex-26-20", "gpt2-break-even"): ("value", "40.7"),
    ("ex-26-20", "vision-break-even"): ("tolerance", "2%"),
}


def test_every_changed_marking_carries_its_correction_note(parts: dict[tuple[str, str], AnswerPart]) -> None:
    found = {key: [(e.field, e.source, e.in_source) for e in p.errata] for key, p in parts.items() if p.errata}
    assert found == {key: [(field, old, False)] for key, (field, old) in CORRECTED_MARKING.items()}
    for key, (field, old) in CORRECTED_MARKING.items():
        part = parts[key]
        [erratum] = part.errata
        assert erratum.note.startswith("this part first accepted") or erratum.note.startswith("this part first asked")
        if field == "value":
            assert float(old) != part.value and old in erratum.note
        else:
            assert str(part.tolerance) != old and old.replace("%", " %") in erratum.note


# ---------------------------------------------------------------- 35.18


def test_35_18_bf16_largest_accepts_the_course_figure(parts: dict[tuple[str, str], AnswerPart]) -> None:
    part = parts[("ex-35-18", "bf16-max")]
    largest = bf16(0x7F7F)  # exponent 254, all 7 mantissa bits set
    assert largest == (2 - 2**-7) * 2.0**127
    assert part.value == pytest.approx(largest, rel=1e-4)
    assert part.tolerance == "1%"
    # 3.4e38 (the course's "same range as FP32", quiz module 202) is 0.31% off the exact value.
    assert 0.001 < abs(3.4e38 / largest - 1) < 0.01
    for answer in ("3.4e38", "3.39e38", "3.3895e38", "3.4×10^38", f"{largest!r}"):
        assert accepts(part, answer), answer
    for answer in ("3.0e38", "3.5e38", "65504", "1.7e38"):
        assert not accepts(part, answer), answer


def test_35_18_bf16_smallest_normal_accepts_the_course_figure(parts: dict[tuple[str, str], AnswerPart]) -> None:
    part = parts[("ex-35-18", "bf16-min-normal")]
    smallest = bf16(0x0080)  # exponent 1, mantissa 0
    assert smallest == 2.0**-126
    assert part.value == pytest.approx(smallest, rel=1e-4)
    assert part.tolerance == "1%"
    # 1.18e-38 (the explanation's own rounding) is 0.38% off the exact value.
    assert 0.001 < abs(1.18e-38 / smallest - 1) < 0.01
    for answer in ("1.18e-38", "1.175e-38", "1.1755e-38", "1.18×10^-38", f"{smallest!r}"):
        assert accepts(part, answer), answer
    for answer in ("6.1e-5", "1e-8", "-1e-8"):
        assert not accepts(part, answer), answer


def test_35_18_bf16_smallest_normal_refuses_near_misses(parts: dict[tuple[str, str], AnswerPart]) -> None:
    part = parts[("ex-35-18", "bf16-min-normal")]
    for answer in ("0", "1.0e-38", "1.3e-38", "9.2e-41"):  # 9.2e-41: the smallest subnormal
        assert not accepts(part, answer), answer


# ---------------------------------------------------------------- 26.1


def test_26_1_c_states_the_units_and_the_growth(parts: dict[tuple[str, str], AnswerPart]) -> None:
    b, c = parts[("ex-26-1", "b-allreduce-time")], parts[("ex-26-1", "c-allreduce-time")]
    note = "MB = 10^6 bytes, GB = 10^9 bytes"
    assert note in b.prompt and note in c.prompt

    def bandwidth_ms(n: int, size: float, beta: float) -> float:
        return 2 * (n - 1) / n * size / beta * 1000

    grew = bandwidth_ms(64, 100e6, 12.5e9) / bandwidth_ms(8, 100e6, 50e9)
    assert grew == pytest.approx(4.5)
    explanation = parts[("ex-26-1", "c-fraction")].explanation
    assert "4.5-fold" in explanation and "fourfold" not in explanation
    # Why the note matters: with binary units (c) comes out 2% to 4.5% off, and is refused.
    decimal = 2 * 63 * 10e-3 + bandwidth_ms(64, 100e6, 12.5e9)
    assert accepts(c, f"{decimal!r}") and accepts(c, "17.01")
    for size, beta in ((100 * 2**20, 12.5e9), (100 * 2**20, 12.5 * 2**30)):
        binary = 2 * 63 * 10e-3 + bandwidth_ms(64, size, beta)
        assert not accepts(c, f"{binary!r}"), binary


# ---------------------------------------------------------------- 26.9


def test_26_9_ridge_dimension_counts_reads_and_one_write(parts: dict[tuple[str, str], AnswerPart]) -> None:
    part = parts[("ex-26-9", "b-ridge-dimension")]
    assert "reading $A$ and $B$ and writing $C$ once" in part.prompt
    ridge = A100_PEAK / 2.0e12
    assert ridge == 156

    def smallest_d(matrices_moved: int) -> int:
        return next(d for d in range(1, 10_000) if 2 * d**3 / (matrices_moved * d * d * 2) >= ridge)

    assert smallest_d(3) == part.value == 468  # read A, read B, write C
    assert accepts(part, "468")
    assert not accepts(part, str(smallest_d(2)))  # 312: reads only
    assert not accepts(part, str(smallest_d(4)))  # 624: C read as well as written
    assert not accepts(part, "467")


# ---------------------------------------------------------------- 26.13


def test_26_13_b_is_the_interval_that_minimizes_training_time(parts: dict[tuple[str, str], AnswerPart]) -> None:
    part = parts[("ex-26-13", "b-sqrt-interval")]
    assert "training time" in part.prompt and "whole number" in part.prompt
    layers = 48

    def memory(k: int) -> float:
        return layers / k + k

    def epoch_time(k: int) -> float:  # in forward passes x steps; backward = 2 forwards
        return (3 + (1 - 1 / k)) * (0.5 if 2 * memory(k) <= layers else 1)

    best = min(range(1, layers + 1), key=epoch_time)
    assert best == part.value == 3
    assert 2 * memory(2) > layers >= 2 * memory(3)  # k = 2 cannot double the batch
    assert epoch_time(best) / 3 == pytest.approx(0.611, abs=1e-3)  # vs 3 forward passes unchecked
    assert part.tolerance == 0
    assert accepts(part, "3")
    for answer in ("2", "4", "7", "6.928"):  # 6.928 = sqrt(48), the memory minimum
        assert not accepts(part, answer), answer


def test_26_13_b_memory_minimum_is_still_asked(parts: dict[tuple[str, str], AnswerPart]) -> None:
    part = parts[("ex-26-13", "b-min-memory")]
    assert "memory curve" in part.prompt
    assert part.value == pytest.approx(2 * math.sqrt(48), rel=1e-4)
    assert accepts(part, "13.86") and not accepts(part, "19")


# ---------------------------------------------------------------- 26.20


def costs_26_20(params: float, tokens: float, gpus: int, mfu: float) -> tuple[float, float, float]:
    hours = 6 * params * tokens / (gpus * A100_PEAK * mfu) / 3600
    return gpus * hours * ON_DEMAND, gpus * hours * SPOT, gpus * 0.5 * SPOT


@pytest.mark.parametrize(
    ("model", "args", "count", "equal_at"),
    [
        ("bert", (110e6, 3.3e9, 8, 0.45), 3, 2.0007),
        ("gpt2", (345e6, 40e9, 16, 0.42), 41, 40.745),
        ("vision", (3e9, 500e9, 64, 0.38), 1224, 1223.76),
    ],
)
def test_26_20_break_even_is_a_count_of_preemptions(
    parts: dict[tuple[str, str], AnswerPart],
    model: str,
    args: tuple[float, float, int, float],
    count: int,
    equal_at: float,
) -> None:
    part = parts[("ex-26-20", f"{model}-break-even")]
    assert "more expensive" in part.prompt and "whole number" in part.prompt
    on_demand, spot, per_preemption = costs_26_20(*args)
    assert (on_demand - spot) / per_preemption == pytest.approx(equal_at, abs=5e-3)
    # Spot is not dearer after count - 1 preemptions, and dearer after count.
    assert spot + (count - 1) * per_preemption <= on_demand < spot + count * per_preemption
    assert part.value == count and part.tolerance == 0
    assert accepts(part, str(count))
    for answer in (str(count - 1), str(count + 1), f"{equal_at}"):
        assert not accepts(part, answer), answer
