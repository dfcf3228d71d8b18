"""The corrections the two seed quizzes carry in their ``errata`` lists hold up.

Where a correction is a number, the test works it out from the question's own text
(the figures in its prompt and options) rather than trusting the explanation; where it
is a wording fix, the test checks that the corrected wording is there and the
source's wording is gone.
"""

from __future__ import annotations

import math
import re

import pytest

from app.content.errata import as_in_source
from app.content.models import ContentTree, Question


@pytest.fixture(scope="module")
def questions(content_tree: ContentTree) -> dict[str, Question]:
    return {q.id: q for quiz in content_tree.quizzes for q in quiz.questions}


def option(q: Question, key: str) -> str:
    return next(o.text for o in q.options if o.key == key)


def number(text: str) -> float:
    return float(text.replace(",", ""))


def erratum_fields(q: Question) -> list[str]:
    return [e.field for e in q.errata]


# --- Module 202 Q23: the failure probability ----------------------------------------------------


def test_m202_q23_key_is_the_option_nearest_the_computed_probability(questions: dict[str, Question]) -> None:
    q = questions["m202-q23"]
    nodes = number(re.search(r"(\d[\d,]*)-node cluster", q.prompt).group(1))
    mtbf = number(re.search(r"MTBF = (\d[\d,]*) hours", q.prompt).group(1))
    assert "1 month" in q.prompt
    hours = 30 * 24
    assert (nodes, mtbf, hours) == (256, 100_000, 720)

    exponent = nodes * hours / mtbf
    p = 1 - math.exp(-exponent)
    assert exponent == pytest.approx(1.843, abs=5e-4)
    assert p == pytest.approx(0.842, abs=5e-4)

    percent = {o.key: number(o.text.rstrip("%")) for o in q.options}
    nearest = min(percent, key=lambda key: abs(percent[key] - 100 * p))
    assert nearest == q.answer == "C"
    assert as_in_source(q).answer == "D"


def test_m202_q23_explanation_arithmetic(questions: dict[str, Question]) -> None:
    q = questions["m202-q23"]
    assert "e^(-1.843) ≈ 0.84 or 84%" in q.explanation
    assert "0.999" not in q.explanation and "99.9%" not in q.explanation
    assert erratum_fields(q) == ["answer", "explanation"]


# --- Module 202 Q4: the bubble fraction ---------------------------------------------------------


def test_m202_q04_bubble_fraction_matches_the_cards_figures(
    questions: dict[str, Question], content_tree: ContentTree
) -> None:
    q = questions["m202-q04"]
    assert "(N-1)/(M+N-1)" in q.explanation
    assert "(N-1)/M " not in q.explanation

    def bubble(n: int, m: int) -> float:
        return (n - 1) / (m + n - 1)

    # The course's card gives worked figures ("P=4, M=16: 16% bubble"); the formula reproduces them.
    card = next(c for deck in content_tree.decks for c in deck.cards if c.id == "mdt-055")
    examples = re.findall(r"P=(\d+), M=(\d+): (\d+)% bubble", card.back)
    assert len(examples) == 2
    for p, m, pct in examples:
        assert round(100 * bubble(int(p), int(m))) == int(pct)
    # The source's (N-1)/M does not: 3/16 ≈ 19%, not 16%.
    assert any(round(100 * (int(p) - 1) / int(m)) != int(pct) for p, m, pct in examples)


# --- Module 202 Q5: the keyed option is true as worded ------------------------------------------


def test_m202_q05_option_b_names_the_larger_effective_batch(questions: dict[str, Question]) -> None:
    q = questions["m202-q05"]
    assert q.answer == "B"
    assert option(q, "B") == "To compensate for the larger effective batch size"
    assert option(as_in_source(q), "B") == "To maintain effective batch size"


# --- Module 202 Q2 and Q16: ring AllReduce ------------------------------------------------------


def ring_all_reduce(values: list[list[float]]) -> tuple[list[list[float]], list[int], list[float]]:
    """Ring AllReduce over len(values) ranks, each holding a vector split into one chunk per rank.

    Returns every rank's result, how many chunks each rank sent, and how many elements it sent.
    """
    n = len(values)
    size = len(values[0])
    bounds = [(size * i // n, size * (i + 1) // n) for i in range(n)]
    data = [list(v) for v in values]
    sends = [0] * n
    sent = [0.0] * n

    def send(rank: int, chunk: int) -> list[float]:
        lo, hi = bounds[chunk]
        sends[rank] += 1
        sent[rank] += hi - lo
        return data[rank][lo:hi]

    # Reduce-scatter: in step s, rank r sends chunk (r - s) to rank r + 1, which adds it in.
    for step in range(n - 1):
        msgs = [(r, (r - step) % n, send(r, (r - step) % n)) for r in range(n)]
        for r, chunk, payload in msgs:
            lo, _ = bounds[chunk]
            dst = (r + 1) % n
            for i, x in enumerate(payload):
                data[dst][lo + i] += x
    # All-gather: rank r now owns the full sum of chunk (r + 1); pass the sums around the ring.
    for step in range(n - 1):
        msgs = [(r, (r + 1 - step) % n, send(r, (r + 1 - step) % n)) for r in range(n)]
        for r, chunk, payload in msgs:
            lo, _ = bounds[chunk]
            dst = (r + 1) % n
            data[dst][lo : lo + len(payload)] = payload
    return data, sends, sent


@pytest.mark.parametrize("n", [2, 3, 4, 8])
def test_ring_all_reduce_sends_2_n_minus_1_chunks_of_d_over_n(n: int) -> None:
    size = 24 * n
    values = [[float(r * 1000 + i) for i in range(size)] for r in range(n)]
    result, sends, sent = ring_all_reduce(values)
    total = [sum(v[i] for v in values) for i in range(size)]
    assert all(r == total for r in result)
    assert sends == [2 * (n - 1)] * n
    # Each rank sends 2(N-1)/N × D: the least any AllReduce can send, at every N.
    assert sent == [pytest.approx(2 * (n - 1) / n * size)] * n


def test_m202_q02_asks_what_the_answer_counts(questions: dict[str, Question]) -> None:
    q = questions["m202-q02"]
    assert "each GPU send a chunk" in q.prompt
    assert option(q, q.answer) == "2(N-1) times"
    assert "D/N" in q.explanation and "2(N-1)/N × D" in q.explanation
    assert "not the number of steps" in q.explanation
    assert erratum_fields(q) == ["prompt", "explanation"]


def test_m202_q16_bandwidth_optimal_at_every_n(questions: dict[str, Question]) -> None:
    q = questions["m202-q16"]
    assert "bandwidth-optimal for every N" in q.explanation
    assert "for large N" not in q.explanation and "approaches" not in q.explanation
    assert "for large N" in as_in_source(q).explanation


# --- Module 202 Q15: NVLink counted both ways ---------------------------------------------------


def test_m202_q15_asks_for_both_directions(questions: dict[str, Question]) -> None:
    q = questions["m202-q15"]
    assert "both directions" in q.prompt
    per_direction = number(re.search(r"(\d+) GB/s in each direction", q.explanation).group(1))
    assert option(q, q.answer) == f"{2 * per_direction:.0f} GB/s" == "600 GB/s"
    assert option(q, "C") == f"{per_direction:.0f} GB/s"  # the one-way figure, now ruled out by the prompt
    # The PCIe comparison is like for like: one way against one way, both against both.
    pcie_one_way = number(re.search(r"about (\d+) GB/s in each direction", q.explanation).group(1))
    pcie_both = number(re.search(r"(\d+) GB/s both ways", q.explanation).group(1))
    assert pcie_both == 2 * pcie_one_way == 64


# --- Module 202 Q14, Q9: wording ----------------------------------------------------------------


def test_m202_q14_infiniband_is_on_by_default(questions: dict[str, Question]) -> None:
    q = questions["m202-q14"]
    assert option(q, q.answer) == "NCCL_IB_DISABLE=0"
    assert "It is the default" in q.explanation and "NCCL_IB_DISABLE=1" in q.explanation
    assert "disabled by default" not in q.explanation


def test_m202_q09_object_refs_are_futures(questions: dict[str, Question]) -> None:
    q = questions["m202-q09"]
    assert "future" in q.explanation
    assert "lazy" not in q.explanation
    assert "lazy evaluation" in as_in_source(q).explanation


# --- Module 202 Q19: the √L saving --------------------------------------------------------------


def test_m202_q19_sqrt_l_saving_at_48_layers(questions: dict[str, Question]) -> None:
    q = questions["m202-q19"]
    layers = int(re.search(r"for L = (\d+)", q.explanation).group(1))
    kept = 2 * math.sqrt(layers)  # L/√L checkpoints plus one recomputed segment of √L layers
    saving = 1 - kept / layers
    assert layers == 48
    assert f"2√48 ≈ {round(kept)} of 48" in q.explanation
    assert round(100 * saving) == 71
    assert f"about {round(100 * saving)}% less" in q.explanation
    assert "~50%" not in q.explanation


# --- Module 202 Q21: the baseline of the speed-up -----------------------------------------------


def test_m202_q21_names_tf32_and_the_key_fits_it(questions: dict[str, Question]) -> None:
    q = questions["m202-q21"]
    assert "TF32" in q.prompt and "TF32" not in as_in_source(q).prompt
    peak = {"FP16/BF16": 312, "TF32": 156, "FP32": 19.5}  # A100 dense TFLOPS
    lo, hi = (number(x) for x in re.fullmatch(r"([\d.]+)-([\d.]+)x", option(q, q.answer)).groups())
    assert lo <= peak["FP16/BF16"] / peak["TF32"] <= hi
    # Against plain FP32 arithmetic the peak ratio is the 16x the explanation sets aside.
    assert peak["FP16/BF16"] / peak["FP32"] == 16
    assert "312" in q.explanation and "156" in q.explanation and "19.5" in q.explanation


# --- Module 202 Q25: Young/Daly ----------------------------------------------------------------


def test_m202_q25_young_daly_interval_lands_on_the_key(questions: dict[str, Question]) -> None:
    q = questions["m202-q25"]
    cost_h = number(re.search(r"takes (\d+) minutes", q.prompt).group(1)) / 60
    mtbf_h = number(re.search(r"\(MTBF\) of (\d[\d,]*) hours", q.prompt).group(1))
    interval = math.sqrt(2 * cost_h * mtbf_h)
    assert interval == pytest.approx(7.07, abs=0.01)

    def hours(text: str) -> tuple[float, float] | None:
        if text == "Every hour":
            return 1, 1
        if m := re.fullmatch(r"Every (\d+)-(\d+) hours", text):
            return float(m.group(1)), float(m.group(2))
        return None  # counted in batches or epochs, not hours

    fits = [o.key for o in q.options if (r := hours(o.text)) and r[0] <= interval <= r[1]]
    assert fits == [q.answer] == ["D"]
    # Daly's refinement (interval - cost) stays in the keyed range too.
    lo, hi = hours(option(q, q.answer))
    assert lo <= interval - cost_h <= hi
    assert "√(2 × 0.25 h × 100 h) ≈ 7 hours" in q.explanation


# --- Chapter 35 Q13: ZeRO stage 1 ---------------------------------------------------------------


def test_ch35_q13_stage_1_saving_depends_on_precision(questions: dict[str, Question]) -> None:
    q = questions["ch35-q13"]
    # Bytes per parameter: (parameters, gradients, optimizer state that stage 1 shards).
    mixed = (2, 2, 4 + 4 + 4)  # fp16/bf16 weights and gradients; fp32 master weights, m and v
    fp32 = (4, 4, 4 + 4)  # fp32 weights and gradients; m and v

    def saving(state: tuple[int, int, int], n: int) -> float:
        return sum(state) / (state[0] + state[1] + state[2] / n)

    assert sum(mixed) == sum(fp32) == 16
    assert saving(mixed, 10**9) == pytest.approx(4, rel=1e-6)
    assert saving(mixed, 64) == pytest.approx(3.82, abs=0.01)
    assert all(saving(fp32, n) < 2 for n in (2, 8, 64, 10**9))
    assert "from 16 to 4 + 12/N bytes" in q.explanation
    assert "from 16 to 8 + 8/N bytes, at most 2x" in q.explanation
    assert "mixed precision" in q.explanation


# --- Chapter 35 Q4: a distractor that was partly true -------------------------------------------


def test_ch35_q04_option_a_is_false_as_worded(questions: dict[str, Question]) -> None:
    q = questions["ch35-q04"]
    assert q.answer == "B"
    assert option(q, "A").startswith("It compresses gradients")
    assert option(as_in_source(q), "A") == "It reduces communication overhead in distributed training"
