"""Trusted checks for bf16-vs-fp16: each grade's model, batches and formats, the reference, the hints.

Never mounted into the sandbox. The reference is ``reference``: the same training on one process
with ``torch.autocast("cpu", dtype)`` and ``torch.amp.GradScaler("cpu")`` itself (enabled for
float16 only), gradients unscaled before they are inspected and clipped. A format's range is
computed here from its bits (and equals ``torch.finfo`` for float16 and bfloat16). The hints
recompute a mistake's numbers (clipping before unscaling, a scaler for bfloat16, a forward
without autocast) and name it only where the submission's numbers are exactly those.
"""

from __future__ import annotations

import math
from typing import Any

import torch

from labs.authoring import Case, Facts, Outcome, load_public, tallies, training

STEPS = 10
BATCH = 4
MAX_NORM = 1.0
DRIVER = load_public(__file__, "driver")
LOSS_TOLERANCE = (1e-5, 1e-6)  # a correct run repeats the reference's float16 arithmetic bit for bit
KNOWN = {"float16": (5, 10), "bfloat16": (8, 7)}


def _draw(gen: torch.Generator, low: int, high: int) -> int:
    """An integer in [low, high], from the submission's generator."""
    return low + int(torch.randint(0, high - low + 1, (1,), generator=gen))


def reference(
    common: dict[str, Any], dtype_name: str, *, clip_first: bool = False, scaler_for_all: bool = False
) -> dict[str, torch.Tensor]:
    """The run of one format on one process: autocast, GradScaler("cpu") for float16, unscale, clip, step.

    ``clip_first`` clips the still-scaled gradients (a mistake's numbers), ``scaler_for_all`` scales
    bfloat16 too (another's).
    """
    dtype = DRIVER.DTYPES[dtype_name]
    model = DRIVER.build_model(int(common["seed"]))
    optimizer = DRIVER.make_optimizer(model)
    scaler = torch.amp.GradScaler(
        "cpu",
        init_scale=float(common["init_scale"]),
        growth_interval=int(common["growth_interval"]),
        enabled=dtype == torch.float16 or scaler_for_all,
    )
    params = list(model.parameters())
    losses, overflows, scales = [], [], []
    for x, y in zip(common["x"], common["y"], strict=True):
        optimizer.zero_grad(set_to_none=True)
        with torch.autocast("cpu", dtype=dtype):
            loss = model(x, y)
        scaler.scale(loss).backward()
        if clip_first:
            torch.nn.utils.clip_grad_norm_(params, MAX_NORM)
        scaler.unscale_(optimizer)
        overflows.append(not all(bool(torch.isfinite(p.grad).all()) for p in params if p.grad is not None))
        if not clip_first:
            torch.nn.utils.clip_grad_norm_(params, MAX_NORM)
        scaler.step(optimizer)  # skipped when a gradient is inf or nan
        scaler.update()
        losses.append(float(loss.detach()))
        scales.append(float(scaler.get_scale()))
    return {
        "losses": torch.tensor(losses, dtype=torch.float64),
        "overflows": torch.tensor(overflows, dtype=torch.bool),
        "scales": torch.tensor(scales, dtype=torch.float64),
    }


def format_range(exponent_bits: int, mantissa_bits: int) -> dict[str, float]:
    """The IEEE-style range of a format: the all-ones exponent is reserved for inf and nan."""
    bias = 2 ** (exponent_bits - 1) - 1
    return {
        "max": math.ldexp(2.0 - math.ldexp(1.0, -mantissa_bits), bias),
        "min_normal": math.ldexp(1.0, 1 - bias),
        "epsilon": math.ldexp(1.0, -mantissa_bits),
    }


def _custom_format(gen: torch.Generator) -> tuple[int, int]:
    """A made-up format, neither float16 nor bfloat16, whose epsilon is not its smallest normal. At most 10
    exponent bits: 2.0 ** 1024 overflows a Python float, so an 11-bit format would turn a wrong largest
    value into a crash instead of a wrong number."""
    while True:
        e, m = _draw(gen, 3, 10), _draw(gen, 2, 23)
        if (e, m) not in KNOWN.values() and m != 2 ** (e - 1) - 2:
            return e, m


def _sawtooth(overflows: torch.Tensor) -> bool:
    """float16 overflowed again after a clean step: the scale grew back into overflow at least once."""
    flags = [bool(v) for v in overflows]
    return any(flags[s] and not flags[s - 1] for s in range(1, len(flags))) and not all(flags)


def cases(world_size: int, gen: torch.Generator) -> list[Case]:
    formats = [[KNOWN[name], _custom_format(gen)] for name in DRIVER.FORMAT_OF_RANK[:world_size]]
    range_expected = [
        {key: torch.tensor([format_range(*f)[key] for f in fs], dtype=torch.float64) for key in format_range(5, 10)}
        for fs in formats
    ]
    for _ in range(20):  # almost always the first draw: a float16 run whose scale grows back into an overflow
        common = {
            "seed": _draw(gen, 0, 2**31 - 1),
            "init_scale": 2.0 ** _draw(gen, 20, 21),
            "growth_interval": _draw(gen, 2, 4),
            "max_norm": MAX_NORM,
        }
        common["x"], common["y"] = DRIVER.make_batches(gen, STEPS, BATCH)
        fp16 = reference(common, "float16")
        if _sawtooth(fp16["overflows"]):
            break
    expected = [fp16, reference(common, "bfloat16")][:world_size]
    said = f"init_scale=2^{int(math.log2(common['init_scale']))}, growth_interval={common['growth_interval']}"
    return [
        Case(
            check="ranges",
            fn="format_range",
            driver="ranges",
            label="format_range of (exponent bits, mantissa bits): "
            + "; ".join(f"rank {r} {fs[0]} and {fs[1]}" for r, fs in enumerate(formats)),
            inputs=[{"formats": fs} for fs in formats],
            expected=range_expected,
            tolerance={"max": (1e-12, 0.0), "min_normal": (1e-12, 0.0), "epsilon": (1e-12, 0.0)},
        ),
        Case(
            check="losses",
            fn="MixedPrecisionTrainer",
            driver="train",
            label=f"{STEPS} steps, rank 0 in float16 and rank 1 in bfloat16, {said}",
            inputs=[{**common, "dtype": DRIVER.FORMAT_OF_RANK[r]} for r in range(world_size)],
            expected=expected,
            parts={"losses": ["losses"], "overflows": ["overflows"], "scales": ["scales"]},
            tolerance={"losses": LOSS_TOLERANCE, "scales": (0.0, 0.0)},
        ),
    ]


def _said(g: Any, i: int, rank: int, key: str) -> list[float] | None:
    got = tallies.said(g, i, rank, key)
    return [float(v) for v in got] if isinstance(got, torch.Tensor) and got.dim() == 1 else None


def _steps(flags: Any) -> list[int]:
    return [s for s, v in enumerate(flags) if bool(v)]


def _common(case: Case, rank: int) -> dict[str, Any]:
    return case.inputs[rank]


def _same(got: list[float] | None, want: torch.Tensor, tol: tuple[float, float] = (0.0, 0.0)) -> bool:
    if got is None or len(got) != len(want):
        return False
    return bool(torch.allclose(torch.tensor(got, dtype=torch.float64), want, rtol=tol[0], atol=tol[1]))


def _forward_differs(case: Case, rank: int, losses: list[float] | None) -> str:
    """Advice where the run's first loss is not the reference's (its gradients differ from the start), else ""."""
    want = case.expected[rank]["losses"][:1]
    if losses is None or _same(losses[:1], want, LOSS_TOLERANCE):
        return ""
    return (
        " The first loss already differs from the reference's (see the losses check), so the gradients, and where"
        " they overflow, differ from the first step on: fix the forward pass first."
    )


CLIPPED_SCALED = (
    " These are the numbers of gradients clipped while still scaled: their norm is the scale times too large, so"
    " clipping shrinks them far too much (and the steps, the later gradients and where they overflow change with"
    " them). Unscale (divide by the scale) first, then clip."
)
_RUNS: dict[tuple[Any, ...], dict[str, torch.Tensor]] = {}


def _variant(case: Case, rank: int, how: str) -> dict[str, torch.Tensor]:
    """A mistake's run for this rank, computed once per grade: ``bf16`` (the float16 rank's run done in
    bfloat16, with its scaler), ``clip_first`` (gradients clipped while scaled), ``scaled`` (a scaler for
    bfloat16 too)."""
    inputs = case.inputs[rank]
    key: tuple[Any, ...] = (how, inputs["dtype"], inputs["seed"], inputs["init_scale"], inputs["growth_interval"])
    key += (inputs["x"].numpy().tobytes(), inputs["y"].numpy().tobytes())
    if key not in _RUNS:
        if len(_RUNS) > 8:  # one grade's worth; the worker lives on
            _RUNS.clear()
        if how == "bf16":
            _RUNS[key] = reference(inputs, "bfloat16", scaler_for_all=True)
        else:
            _RUNS[key] = reference(inputs, inputs["dtype"], clip_first=how == "clip_first", scaler_for_all=True)
    return _RUNS[key]


def _fp16_mistake(g: Any, i: int, case: Case, rank: int) -> str:
    """Advice where the float16 run was not scaled or not computed in float16 (told from its numbers), else ""."""
    if case.inputs[rank]["dtype"] != "float16":
        return ""
    scales = _said(g, i, rank, "scales")
    if scales is not None and scales and all(v == 1.0 for v in scales):
        return (
            " float16 ran without a loss scale (scale() was 1.0 after every step): unscaled, its gradients stay"
            " far below 65504, so the steps where the reference's scaled gradients overflow (and are skipped) ran"
            " here. float16 needs loss scaling: start at init_scale, x 0.5 after"
            " an overflow, x 2 after growth_interval clean steps in a row; the reference's first steps overflow."
        )
    losses = _said(g, i, rank, "losses")
    if _same(losses, _variant(case, rank, "bf16")["losses"], LOSS_TOLERANCE):
        return (
            " These are bfloat16's numbers: the float16 rank computed in bfloat16, where nothing overflows."
            ' torch.autocast("cpu") without dtype= computes in bfloat16: pass dtype=torch.float16.'
        )
    clipped = _variant(case, rank, "clip_first")
    if _same(losses, clipped["losses"], LOSS_TOLERANCE) and _same(scales, clipped["scales"]):
        return CLIPPED_SCALED
    return ""


def _scales_hint(g: Any, i: int, case: Case, rank: int) -> str:
    got = _said(g, i, rank, "scales")
    if got is None:
        return ""
    inputs = _common(case, rank)
    init = float(inputs["init_scale"])
    if forward := _forward_differs(case, rank, _said(g, i, rank, "losses")):
        return forward
    if mistake := _fp16_mistake(g, i, case, rank):
        return mistake
    if inputs["dtype"] == "bfloat16":
        if _same(got, _variant(case, rank, "scaled")["scales"]):
            return (
                " These are the scales of a loss scaler used with bfloat16 too: bfloat16 has float32's 8 exponent"
                " bits, so its gradients cannot overflow where float32's would not. Scale the loss for float16 only"
                " (scale() returns 1.0 for bfloat16), as GradScaler is used only with float16."
            )
        return " bfloat16 needs no loss scaling: scale() must return 1.0 after every bfloat16 step."
    if all(v == init for v in got):
        return (
            f" The scale stayed at init_scale = {init:g} while the gradients overflowed: after an overflow the"
            " scale must back off (x 0.5), or every later step overflows again and is skipped."
        )
    if all(v == 1.0 for v in got):
        return (
            " float16 needs loss scaling: start at init_scale, x 0.5 after an overflow, x 2 after growth_interval"
            " clean steps in a row."
        )
    return (
        " After each float16 step: on an overflow, scale x 0.5 and the count of clean steps back to 0; otherwise"
        " count the step, and when the count reaches growth_interval, scale x 2 and the count back to 0."
    )


def scales(facts: Facts) -> Outcome:
    return training.judge(
        facts, "scales", _scales_hint, success="GradScaler's scale after every step (1.0 for bfloat16)"
    )


def _overflows_hint(g: Any, i: int, case: Case, rank: int) -> str:
    got = tallies.said(g, i, rank, "overflows")
    losses = _said(g, i, rank, "losses")
    want = _steps(case.expected[rank]["overflows"])
    if not isinstance(got, torch.Tensor) or losses is None:
        return ""
    if forward := _forward_differs(case, rank, losses):
        return forward
    if mistake := _fp16_mistake(g, i, case, rank):
        return mistake
    mine = _steps(got)
    scales = _said(g, i, rank, "scales")
    if len(mine) == len(got) and scales is not None and set(scales) == {float(case.inputs[rank]["init_scale"])}:
        return (
            " Every step overflowed and the scale stayed at init_scale: it must back off (x 0.5) after an overflow,"
            " until the scaled gradients fit in float16 (see the scales check)."
        )
    differ = [s for s in range(len(got)) if bool(got[s]) != (s in want)]
    s = differ[0] if differ else None
    if s is not None and s in want and _same(losses[: s + 1], case.expected[rank]["losses"][: s + 1], LOSS_TOLERANCE):
        return (
            f" At step {s} the reference's float16 gradients overflowed; no overflow was reported there, and the loss"
            f" returned for it ({losses[s]:.4f}) was finite: the loss is computed in float32, and the overflow happens"
            " in the backward pass, where the"
            " scaled float16 gradients pass 65504. Look for inf and nan in the gradients (torch.isfinite), not in"
            " the loss."
        )
    if mine and not want:
        return (
            f" Overflows were reported at steps {mine[:5]}, where the reference's gradients held no inf or nan. Report"
            " an overflow only where some gradient is not finite (in bfloat16, none ever is here)."
        )
    return (
        " A step overflowed when some gradient (after backward, unscaled) holds an inf or nan: report exactly"
        " those steps."
    )


def overflows(facts: Facts) -> Outcome:
    return training.judge(facts, "overflows", _overflows_hint, success="the reference's overflowed steps")


def _first_loss(inputs: dict[str, Any], how: str) -> float:
    """The first step's loss of a forward done ``how``: cast (model.to(dtype)), float32, or autocast(other dtype)."""
    model = DRIVER.build_model(int(inputs["seed"]))
    dtype = DRIVER.DTYPES[inputs["dtype"]]
    x, y = inputs["x"][0], inputs["y"][0]
    with torch.no_grad():
        if how == "cast":
            return float(model.to(dtype)(x, y))
        if how == "float32":
            return float(model(x, y))
        other = torch.bfloat16 if dtype == torch.float16 else torch.float16
        with torch.autocast("cpu", dtype=other):
            return float(model(x, y))


def _frozen_losses(inputs: dict[str, Any]) -> torch.Tensor:
    """Each batch's loss under the initial weights (autocast in the rank's format): a run that never stepped."""
    model = DRIVER.build_model(int(inputs["seed"]))
    with torch.no_grad(), torch.autocast("cpu", dtype=DRIVER.DTYPES[inputs["dtype"]]):
        return torch.tensor(
            [float(model(x, y)) for x, y in zip(inputs["x"], inputs["y"], strict=True)], dtype=torch.float64
        )


def _losses_hint(g: Any, i: int, case: Case, rank: int) -> str:
    got = _said(g, i, rank, "losses")
    if got is None:
        return ""
    inputs = _common(case, rank)
    name = inputs["dtype"]
    want = case.expected[rank]["losses"]
    if not all(math.isfinite(v) for v in got):
        bad = next(s for s, v in enumerate(got) if not math.isfinite(v))
        return (
            f" The {name} loss is not finite from step {bad}: a step was taken with gradients that held an inf or"
            " nan, and the weights took it in. Skip optimizer.step() when any gradient is not finite."
        )
    first = torch.tensor(got[:1], dtype=torch.float64)
    first_right = torch.allclose(first, want[:1], rtol=LOSS_TOLERANCE[0], atol=LOSS_TOLERANCE[1])
    # A forward done another way can land within the tolerance of the reference's first loss (a 16-bit result
    # rounds close now and then: 1 draw in 200): it is named wherever the first loss is measurably not the
    # reference's and is that forward's, to 1e-6.
    if not math.isclose(got[0], float(want[0]), rel_tol=1e-6):
        ways = {
            "cast": f"the whole model cast to {name} (model.to(dtype) or .half()) instead of autocast",
            "float32": "a float32 forward: no autocast around the model",
            "other": 'autocast in the other format (torch.autocast("cpu") without dtype= computes in bfloat16)',
        }
        for how, what in ways.items():
            if math.isclose(got[0], _first_loss(inputs, how), rel_tol=1e-6):
                return (
                    f" The first loss is that of {what}. Run the forward under"
                    f' torch.autocast("cpu", dtype=torch.{name}): the Linear layers and matrix products compute in'
                    f" {name} while the parameters (and their gradients) stay float32."
                )
    if not first_right:
        return (
            f' The first loss is already not that of the float32 model\'s forward under torch.autocast("cpu",'
            f" dtype=torch.{name})."
        )
    if mistake := _fp16_mistake(g, i, case, rank):
        return mistake
    if _same(got, _frozen_losses(inputs), LOSS_TOLERANCE):
        flags = tallies.said(g, i, rank, "overflows")
        skipped = isinstance(flags, torch.Tensor) and bool(flags.all())
        return (
            f" These are the initial weights' losses on every batch (to 1e-5): the weights did not move in {STEPS}"
            " steps." + (" Every step was reported as overflowed: see the scales check." if skipped else "")
        )
    return (
        " The first loss is right, the later ones are not: the updates differ from the reference's (unscale, then"
        f" clip the gradient norm to {MAX_NORM:g}, then SGD; skip the step on an overflow)."
    )


def losses(facts: Facts) -> Outcome:
    return training.judge(facts, "losses", _losses_hint, success="the reference run's loss after every step")


def _ranges_hint(g: Any, i: int, case: Case, rank: int) -> str:
    said = tallies.said(g, i, rank, "max")
    eps = tallies.said(g, i, rank, "epsilon")
    formats = case.inputs[rank]["formats"]
    notes = []
    if isinstance(said, torch.Tensor) and said.shape == (len(formats),):
        without = torch.exp2(torch.tensor([float(2 ** (e - 1)) for e, _ in formats], dtype=torch.float64))
        if torch.equal(said, without):
            notes.append(
                " The largest values are 2^(bias + 1): that exponent is all ones, reserved for inf and nan. The"
                " largest finite value has exponent 2^bias and every mantissa bit set: (2 - 2^-m) x 2^bias."
            )
    if isinstance(eps, torch.Tensor) and eps.shape == (len(formats),):
        normal = torch.tensor([format_range(e, m)["min_normal"] for e, m in formats], dtype=torch.float64)
        if torch.equal(eps, normal):
            notes.append(
                " The epsilons are the smallest normals: epsilon is the gap between 1 and the next value, one unit"
                " in the last of the m mantissa bits, 2^-m: it depends on the mantissa, not on the exponent."
            )
    if notes:
        return "".join(notes)
    return (
        " For e exponent bits and m mantissa bits (bias 2^(e-1) - 1, the all-ones exponent reserved): the largest"
        " finite value, the smallest positive normal and the gap between 1 and the next value."
    )


def ranges(facts: Facts) -> Outcome:
    return training.judge(facts, "ranges", _ranges_hint, success="the formats' ranges")


RULES = {"losses": losses, "overflows": overflows, "scales": scales, "ranges": ranges}
