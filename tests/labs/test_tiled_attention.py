"""tiled-attention graded for real: what each mutant loses, other correct designs, the kernel's memory figure."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from labs.host import template
from labs.spec import DEFAULT_CONTENT
from labs.spec.mutants import Mutant

from .mutant_cases import assert_loses, mutant_params
from .mutant_cases import mutant as lab_mutant

LAB = DEFAULT_CONTENT / "tiled-attention"
EVERY = {"output", "large-logits", "logsumexp", "memory"}

# Written differently from solution.py: FlashAttention-2 style blocks of 128 queries as well, einsum,
# the statement's l_corrected spelled out, and keepdim shapes throughout.
BLOCKED = """
import math

import torch


def tiled_attention(q, k, v, tile_size):
    n = k.shape[-2]
    scale = 1.0 / math.sqrt(q.shape[-1])
    outs, lses = [], []
    for qs in range(0, q.shape[-2], 128):
        qb = q[..., qs : qs + 128, :]
        m_prev = qb.new_full(qb.shape[:-1] + (1,), float("-inf"))
        l_prev = qb.new_zeros(qb.shape[:-1] + (1,))
        o = torch.zeros_like(qb)
        for ks in range(0, n, tile_size):
            s_new = torch.einsum("bhid,bhjd->bhij", qb, k[..., ks : ks + tile_size, :]) * scale
            m_new = torch.maximum(m_prev, s_new.max(dim=-1, keepdim=True).values)
            l_corrected = l_prev * torch.exp(m_prev - m_new)
            p = torch.exp(s_new - m_new)
            l_new = l_corrected + p.sum(dim=-1, keepdim=True)
            o = o * torch.exp(m_prev - m_new) + torch.einsum("bhij,bhjd->bhid", p, v[..., ks : ks + tile_size, :])
            m_prev, l_prev = m_new, l_new
        outs.append(o / l_prev)
        lses.append((m_prev + l_prev.log()).squeeze(-1))
    return torch.cat(outs, dim=-2), torch.cat(lses, dim=-1)
"""


@pytest.fixture(scope="module")
def tiled_grader() -> Iterator[object]:
    from labs.host.grader import Grader

    g = Grader(DEFAULT_CONTENT, pool_size=2, fork_from_template=template.available())
    yield g
    g.close()


@pytest.mark.parametrize("mutant", mutant_params("tiled-attention"))
def test_mutant_loses_exactly_its_checks(tiled_grader, mutant: Mutant) -> None:
    verdict = tiled_grader.grade("tiled-attention", mutant.code)
    assert_loses(verdict, mutant)
    lost = {c.id for c in verdict.checks if c.score < c.points}
    assert all(len(c.message) > 40 for c in verdict.checks if c.id in lost)


def test_hints_name_the_mistake(tiled_grader) -> None:
    def messages(mutant: str) -> dict[str, str]:
        verdict = tiled_grader.grade("tiled-attention", lab_mutant("tiled-attention", mutant).code)
        return {c.id: c.message for c in verdict.checks}

    assert "the last tile has only 16 keys" in messages("last_tile_dropped")["output"]
    assert "overflowed" in messages("naive_exp")["large-logits"]
    assert "wrong scale" in messages("scale_by_d")["output"]
    assert "multiply the accumulated output" in messages("accumulator_not_rescaled")["output"]
    assert "at least one full 2048 x 2048 score matrix" in messages("full_matrix")["memory"]
    assert "measured by the kernel" in messages("full_matrix")["memory"]


# Written differently again: the keys as a list of tiles (torch.split), the running state kept as
# log-sum-exp itself (no separate max and sum), and torch.logaddexp to merge each tile in.
LOG_DOMAIN = """
import math

import torch


def tiled_attention(q, k, v, tile_size):
    q = q * (1.0 / math.sqrt(q.shape[-1]))
    lse = None
    out = None
    for kt, vt in zip(torch.split(k, tile_size, dim=-2), torch.split(v, tile_size, dim=-2)):
        s = torch.matmul(q, kt.transpose(-1, -2))
        tile_lse = torch.logsumexp(s, dim=-1)
        tile_out = torch.matmul(torch.exp(s - tile_lse.unsqueeze(-1)), vt)
        if lse is None:
            lse, out = tile_lse, tile_out
            continue
        new = torch.logaddexp(lse, tile_lse)
        out = out * torch.exp(lse - new).unsqueeze(-1) + tile_out * torch.exp(tile_lse - new).unsqueeze(-1)
        lse = new
    return out, lse
"""


@pytest.mark.parametrize("code", [BLOCKED, LOG_DOMAIN], ids=["query-blocks", "log-domain"])
def test_other_correct_designs_get_full_marks(tiled_grader, code: str) -> None:
    verdict = tiled_grader.grade("tiled-attention", code)
    assert verdict.status == "passed" and verdict.score == verdict.max_score == 10, [
        (c.id, c.message) for c in verdict.checks
    ]


def test_reference_memory_is_a_fraction_of_the_full_matrix(tiled_grader) -> None:
    verdict = tiled_grader.grade("tiled-attention", (LAB / "solution.py").read_text())
    assert verdict.status == "passed" and verdict.score == verdict.max_score, verdict
    (memory,) = [c for c in verdict.checks if c.id == "memory"]
    full = memory.data["full_matrix_bytes"]
    assert full == 2048 * 2048 * 8
    # Tiles of 64 keys hold a few (1, 1, 2048, 64) tensors at once, beside Python's and torch's own memory.
    assert memory.data["peak_bytes"] < 0.5 * full, memory.data
    assert "measured by the kernel" in memory.message


def test_starter_runs_and_says_what_to_write(tiled_grader) -> None:
    verdict = tiled_grader.grade("tiled-attention", (LAB / "starter.py").read_text())
    assert verdict.score == 0
    assert "update m, ell and acc" in verdict.checks[0].message
