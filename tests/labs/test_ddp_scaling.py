"""ddp-scaling's model clock: no draw where two mistakes give one figure, and every mistake named where they do."""

from __future__ import annotations

import copy

import torch

from labs.host.grader import Grader
from labs.spec import DEFAULT_CONTENT

LAB = DEFAULT_CONTENT / "ddp-scaling"


def _checks():  # type: ignore[no-untyped-def]
    return Grader.load_checks(LAB)[1]


def test_no_clock_drawn_makes_the_optimizer_step_over_n_look_like_fewer_all_reduces() -> None:
    """u / N off the step on N = 2 or 4 ranks equals m all-reduces fewer when u = 2 N m alpha: the draw avoids it."""
    clock = _checks().model_clock
    alphas = set()
    for seed in range(3000):
        drawn = clock.draw(torch.Generator().manual_seed(seed))
        update_us, alpha_us = round(drawn["update_s"] * 1e6), round(drawn["alpha_s"] * 1e6)
        assert update_us % (4 * alpha_us) != 0, drawn
        assert 10 <= alpha_us <= 60 and 200 <= update_us <= 800, drawn
        alphas.add(alpha_us)
    # Every latency that some optimizer step (200-800 us, in hundreds) allows is still drawn: all but 25 us.
    assert alphas == {a for a in range(10, 61) if any(u % (4 * a) for u in range(200, 801, 100))}, alphas


def _world_size_2_case(checks, update_us: int, alpha_us: int):  # type: ignore[no-untyped-def]
    phase = next(p for p in checks.phases([1, 2, 4], torch.Generator().manual_seed(5)) if p.world_size == 2)
    case = copy.copy(phase.cases[0])
    inputs = {**case.inputs[0], "clock": {**case.inputs[0]["clock"], "update_s": update_us * 1e-6}}
    inputs["clock"]["alpha_s"] = alpha_us * 1e-6
    case.inputs = [inputs, *case.inputs[1:]]
    return case


def test_a_figure_two_mistakes_give_names_both() -> None:
    """Six all-reduces on the wire priced as one is 10 alpha off the step on 2 ranks; with u = 20 alpha, so is
    the optimizer step divided by 2. The message names both, never one of them as the student's."""
    checks = _checks()
    case = _world_size_2_case(checks, 300, 15)
    inputs = case.inputs[0]
    batch = int(inputs["batch"])
    priced_once = checks.model_clock.step_seconds(inputs["clock"], 2, batch, 1, checks.gradient_bytes(case))["step"]
    said = checks._mistake(batch / priced_once, case, 2, 6)
    assert said.startswith("either ") and "(these give the same figure here)" in said, said
    assert "it divides the optimizer step by N" in said, said
    assert "it prices 1 all-reduce per step, but your ranks made 6" in said, said
    # Apart (u = 20.5 alpha, the ratio the draw keeps): the wire's count alone explains the figure.
    apart = _world_size_2_case(checks, 410, 20)
    priced_once = checks.model_clock.step_seconds(apart.inputs[0]["clock"], 2, batch, 1, checks.gradient_bytes(apart))
    said = checks._mistake(batch / priced_once["step"], apart, 2, 6)
    assert said.startswith("it prices 1 all-reduce per step, but your ranks made 6"), said


def test_a_figure_without_latency_is_said_as_that_not_as_a_count_of_all_reduces() -> None:
    """No latency is the price of 0 all-reduces, and alpha once per all-reduce on 2 ranks the price of half of
    them: the same mistake in two words. The message gives it once, as the mistake about the latency."""
    checks = _checks()
    case = _world_size_2_case(checks, 410, 20)
    inputs, nbytes = case.inputs[0], checks.gradient_bytes(case)
    batch, alpha = int(inputs["batch"]), inputs["clock"]["alpha_s"]
    parts = checks.model_clock.step_seconds(inputs["clock"], 2, batch, 6, nbytes)
    said = checks._mistake(batch / (parts["step"] - parts["latency"]), case, 2, 6)
    assert said.startswith("it leaves out the latency") and "either" not in said and "prices" not in said, said
    said = checks._mistake(batch / (parts["step"] - parts["latency"] + 6 * alpha), case, 2, 6)
    assert said.startswith("it charges alpha once per all-reduce") and "either" not in said, said
