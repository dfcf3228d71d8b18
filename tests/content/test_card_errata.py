"""The corrected mire-dis-train cards state the corrected facts.

Each test reads one corrected card and checks the fact it now states, computing
the number where there is one, so the card and the arithmetic cannot drift
apart. Corrections keep the card's id and number: students' review schedules and
Anki exports follow the id.
"""

from __future__ import annotations

import math
import re
import struct

import pytest

from app.content.models import Card, ContentTree

DECK_ID = "mire-dis-train"
CORRECTED_NUMBERS = [1, 2, 3, 5, 11, 14, 18, 32, 51, 55, 59, 61, 62, 66, 67, 71, 75, 80]
ZERO2_CARDS = [5, 11, 62, 66, 67]


@pytest.fixture(scope="module")
def cards(content_tree: ContentTree) -> dict[int, Card]:
    deck = next(d for d in content_tree.decks if d.id == DECK_ID)
    return {card.number: card for card in deck.cards}


def text(card: Card) -> str:
    """Front and back as one line, so a phrase split across lines still matches."""
    return " ".join(f"{card.front}\n{card.back}".split())


@pytest.mark.parametrize("number", CORRECTED_NUMBERS)
def test_corrected_card_keeps_id_and_number(number: int, cards: dict[int, Card]) -> None:
    card = cards[number]
    assert card.id == f"mdt-{number:03d}"
    assert card.number == number
    assert card.errata, f"card {number} is corrected and must say so in errata"


# Backpropagation (cards 1, 2, 32): column vectors, h_i = W_i h_(i-1).


def test_card_1_propagates_error_with_transposed_weights_on_the_left(cards: dict[int, Card]) -> None:
    back = cards[1].back
    assert "δ_i = W_(i+1)^T · δ_(i+1)" in back
    assert "∂L/∂W_i = δ_i · h_(i-1)^T" in back
    assert "δ_(i+1) · W_(i+1)^T" not in back


def test_card_2_chain_rule_for_w1(cards: dict[int, Card]) -> None:
    back = cards[2].back
    assert "W₂^T · W₃^T · (h₃ − y) · x^T" in back
    assert "L = ½‖h₃ − y‖²" in back
    assert "δ_i = W_(i+1)^T · δ_(i+1)" in back
    assert "(h₃ − y) · W₃^T" not in back
    assert "δ_(i+1) · W_(i+1)^T" not in back

    # The formula is the gradient of L = ½‖W₃W₂W₁x − y‖² (checked by central differences).
    w1 = [[0.3, -0.2], [0.5, 0.1], [-0.4, 0.7]]
    w2 = [[0.2, -0.6, 0.4], [0.9, 0.3, -0.1]]
    w3 = [[-0.5, 0.8], [0.6, 0.2]]
    x, y = [[1.0], [-2.0]], [[0.5], [-1.5]]

    def mul(a: list[list[float]], b: list[list[float]]) -> list[list[float]]:
        return [[sum(a[i][k] * b[k][j] for k in range(len(b))) for j in range(len(b[0]))] for i in range(len(a))]

    def t(a: list[list[float]]) -> list[list[float]]:
        return [list(row) for row in zip(*a, strict=True)]

    def loss(w: list[list[float]]) -> float:
        h3 = mul(w3, mul(w2, mul(w, x)))
        return 0.5 * sum((h3[i][0] - y[i][0]) ** 2 for i in range(len(y)))

    h3 = mul(w3, mul(w2, mul(w1, x)))
    residual = [[h3[i][0] - y[i][0]] for i in range(len(y))]
    formula = mul(mul(mul(t(w2), t(w3)), residual), t(x))
    eps = 1e-6
    for i, row in enumerate(w1):
        for j in range(len(row)):
            up = [[v + eps if (r, c) == (i, j) else v for c, v in enumerate(rw)] for r, rw in enumerate(w1)]
            down = [[v - eps if (r, c) == (i, j) else v for c, v in enumerate(rw)] for r, rw in enumerate(w1)]
            assert formula[i][j] == pytest.approx((loss(up) - loss(down)) / (2 * eps), abs=1e-8)


def test_card_32_question_b_uses_transposed_weights_on_the_left(cards: dict[int, Card]) -> None:
    back = cards[32].back
    assert "`δ_(i-1) = W_i^T · δ_i`" in back
    assert "`∂L/∂W_i = δ_i · h_(i-1)^T`" in back
    assert "δ_i · W_i^T" not in back


def test_card_3_mentions_tree_algorithms(cards: dict[int, Card]) -> None:
    back = cards[3].back
    assert "ring algorithm" in back
    assert "tree algorithms" in back
    assert "NCCL" in back


# ZeRO-2 communicates as much as DDP: reduce-scatter (Ψ) + all-gather (Ψ) = all-reduce (2Ψ).


@pytest.mark.parametrize("number", ZERO2_CARDS)
def test_zero2_no_longer_halves_communication(number: int, cards: dict[int, Card]) -> None:
    said = text(cards[number])
    for wrong in [
        "half of DDP",
        "LESS than DDP",
        "50% less",
        "less communication than DDP",
        "ZeRO-2 < DDP",
        "ZeRO-2 comm < DDP",
        "ZeRO-2 also reduces comm",
        "Small all-gather",
        "free improvement",
    ]:
        assert wrong.lower() not in said.lower(), f"card {number} still says {wrong!r}"
    assert re.search(r"same (total communication )?as DDP|ZeRO-2( comm)? = DDP|SAME as DDP", said), said


def test_zero_communication_volumes() -> None:
    psi = 1.0  # parameters' (and gradients') size in bytes
    all_reduce = 2 * psi  # ring: reduce-scatter + all-gather
    zero2 = psi + psi  # reduce-scatter gradients, all-gather updated parameters
    zero3 = 2 * psi + psi  # all-gather in forward and backward, reduce-scatter gradients
    assert zero2 == all_reduce
    assert zero3 / all_reduce == 1.5


def test_card_11_orders_volumes(cards: dict[int, Card]) -> None:
    back = cards[11].back
    assert "ZeRO-2 = DDP < ZeRO-3/FSDP" in back
    assert "~2N bytes (same as DDP)" in back
    assert "~3N bytes (~1.5× DDP)" in back


def test_card_67_asks_without_a_false_premise(cards: dict[int, Card]) -> None:
    card = cards[67]
    assert card.front == "Does reduce-scatter reduce communication vs DDP?"
    assert "ZeRO-2 comm = DDP" in card.back
    assert "reduce-scatter grads (~D) + all-gather params (~D) = ~2D" in card.back


# ZeRO memory: bf16 weights 2N + bf16 grads 2N + optimizer state 12N (fp32 master, Adam m and v).


def zero_bytes_per_param(stage: int, k: int) -> float:
    weights, grads, optimizer = 2, 2, 12
    if stage == 1:
        return weights + grads + optimizer / k
    if stage == 2:
        return weights + (grads + optimizer) / k
    return (weights + grads + optimizer) / k


def test_card_61_stage_1_shards_master_weights(cards: dict[int, Card]) -> None:
    assert zero_bytes_per_param(1, 8) == 5.5
    assert 7 * zero_bytes_per_param(1, 8) == 38.5
    back = cards[61].back
    assert "4N + 12N/K" in back
    assert "2N + 14N/K" in back
    assert "5.5N" in back
    assert "38.5 GB" in back
    assert "8N/K" not in back


def test_card_62_memory_per_stage(cards: dict[int, Card]) -> None:
    assert [zero_bytes_per_param(s, 8) for s in (1, 2, 3)] == [5.5, 3.75, 2.0]
    assert 7 * zero_bytes_per_param(3, 8) == 14
    back = cards[62].back
    assert "ZeRO-1: 4N+12N/K | ZeRO-2: 2N+14N/K | FSDP: **16N/K**" in back
    assert "ZeRO-1 5.5N → ZeRO-2 3.75N → FSDP **2N**" in back
    assert "8N+8N/K" not in back
    assert "6N+10N/K" not in back
    assert "ZeRO-2 comm = DDP" in back


def test_card_59_optimizer_state_is_12n_over_p(cards: dict[int, Card]) -> None:
    back = cards[59].back
    assert "Optimizer state (fp32 master + Adam m, v): 12N/P bytes" in back
    assert "all model state 16N/P" in back
    assert "Optimizer: 16N/P" not in back


# Scaling, pipelines and 3D parallelism.


def test_card_18_amdahl_with_256_gpus(cards: dict[int, Card]) -> None:
    speedup = 1 / (0.02 + 0.98 / 256)
    assert round(speedup, 1) == 42.0
    assert round(100 * speedup / 256, 1) == 16.4
    assert round(1 / 0.02) == 50  # the limit as the GPU count grows without bound
    back = cards[18].back
    assert "1/(0.02 + 0.98/256) ≈ 42× speedup (16.4% efficiency)" in back
    assert "limit with infinitely many GPUs" in back
    assert "max 50× speedup" not in back
    assert "78%" not in back


def test_card_55_bubble_for_many_micro_batches(cards: dict[int, Card]) -> None:
    def bubble(p: int, m: int) -> float:
        return (p - 1) / (m + p - 1)

    assert bubble(4, 1000) == pytest.approx(3 / 1000, rel=0.01)
    assert bubble(4, 1000) != pytest.approx(1 / 1000, rel=0.5)
    assert round(100 * bubble(4, 16)) == 16
    assert round(100 * bubble(4, 32)) == 9
    back = cards[55].back
    assert "≈ (P-1)/M when M >> P" in back
    assert "≈ 1/M" not in back


def test_card_71_per_gpu_share(cards: dict[int, Card]) -> None:
    params = 70e9 / (8 * 4)
    assert round(params / 1e9, 2) == 2.19
    assert round(2 * params / 1e9, 1) == 4.4
    assert 16 * params / 1e9 == 35.0
    back = cards[71].back
    assert "1/4 of layers, 1/8 of each matrix" in back
    assert "2.19B" in back
    assert "~4.4 GB bf16 weights" in back
    assert "~35 GB training state" in back
    assert "1/8 of layers" not in back


def test_card_51_ring_factor_and_one_way_nvlink(cards: dict[int, Card]) -> None:
    tensor = 4 * 2048 * 8192 * 2  # b·s·d in bf16
    assert tensor == 128 * 2**20
    per_forward_gb = 2 * 40 * tensor / 2**30  # ~10 GB
    ring = 2 * (8 - 1) / 8
    assert ring == 1.75
    sent_gb = ring * round(per_forward_gb)
    assert sent_gb == 17.5
    assert round(1000 * sent_gb / 300, -1) == 60  # NVLink: 600 GB/s both ways = 300 GB/s each way
    assert round(1000 * sent_gb / 50) == 350  # InfiniBand at 50 GB/s
    back = cards[51].back
    assert "2(N-1)/N" in back
    assert "~17.5 GB" in back
    assert "600 GB/s both ways = 300 GB/s each way): ~60 ms" in back
    assert "~350 ms" in back
    assert "~17 ms" not in back


# Precision and activation checkpointing.


def test_card_14_bf16_is_not_immune_to_overflow(cards: dict[int, Card]) -> None:
    bf16_max = (2 - 2**-7) * 2.0**127
    assert bf16_max < float("inf")
    assert round(bf16_max / 1e38, 1) == 3.4
    back = cards[14].back
    assert "immune" not in back
    assert "no overflow" not in back
    assert "don’t underflow" in back
    assert "overflows only about where fp32 does" in back


def to_bf16(value: float) -> float:
    """Round a float to bfloat16 (the top 16 bits of fp32, round to nearest even)."""
    bits = struct.unpack("<I", struct.pack("<f", value))[0]
    bits = (bits + 0x7FFF + ((bits >> 16) & 1)) & 0xFFFF0000
    return struct.unpack("<f", struct.pack("<I", bits))[0]


def test_card_75_updates_vanish_below_half_the_bf16_gap(cards: dict[int, Card]) -> None:
    for w in (1.0, 1.5, 1.99, 0.01, 300.0):
        w = to_bf16(w)
        exponent = math.frexp(w)[1] - 1  # 2**exponent <= w < 2**(exponent + 1)
        half_gap = 2.0 ** (exponent - 8)  # bf16 keeps 8 significant bits
        assert w * 2**-9 < half_gap <= w * 2**-8
        assert to_bf16(w + 0.99 * half_gap) == w  # lost
        assert to_bf16(w + 1.01 * half_gap) > w  # kept
        assert 0.99 * half_gap > 2.0**-126  # far above bf16's smallest normal number
    back = cards[75].back
    assert "half the gap between bf16 values near w (|w|·2⁻⁹ to |w|·2⁻⁸)" in back
    assert "w + update rounds back to w" in back
    assert "half-precision minimum" not in back


def test_card_80_every_layer_checkpointing_is_o_of_l(cards: dict[int, Card]) -> None:
    layers = 32
    # Checkpoint every layer: keep L layer inputs, recompute each layer once = one extra forward.
    every_layer_recompute = layers
    # O(1) memory: keep only the input, recompute layers 1..i-1 before the backward of layer i.
    constant_memory_recompute = sum(range(layers))
    assert every_layer_recompute / layers == 1  # ≈ 1/3 of forward + backward (backward ≈ 2 forwards)
    assert constant_memory_recompute == layers * (layers - 1) // 2
    back = cards[80].back
    assert "every layer O(L)/~33%" in back
    assert "O(1) memory needs O(L²) recompute" in back
    assert "O(1)/100%" not in back
