"""Trusted checks for fsdp-mixed-precision: per-submission inputs, the emulated reference, the rules.

Never mounted into the sandbox. The reference is ``driver.emulate``: mixed precision done by
hand on one process (bfloat16 copies of the float32 master weights run each rank's forward and
backward, the gradients are averaged in float32, AdamW updates float32 masters). Full float32
training is the wrong target: it differs from a correct run by ~1e-2 after three steps. The same
emulation with other dtypes (float32 everywhere, a bfloat16 reduction, float16 parameters) only
serves to tell the student which mistake the numbers show.
"""

from __future__ import annotations

import hashlib
from concurrent.futures import Future
from typing import Any

import torch

from labs.authoring import Case, Facts, GroupRun, Outcome, later, load_public, result, training, wire

DIMS = {"width": 120, "blocks": 2}  # 6 Linear layers of 120 x 120 + a LayerNorm: 349,440 float32 bytes
BATCH = 24
STEPS = 3
LR, WEIGHT_DECAY = 1e-2, 0.01
# On 2 ranks a correct run equals the emulation bit for bit (a + b is the same in either order, and
# halving is exact). On 4, gloo adds the four float32 gradients in its own order: they differ from
# the emulation's rank order by a few ulps (measured up to 5e-10 absolute), which AdamW's first
# steps mostly absorb. A bfloat16 reduction is off by ~2^-9 relative (1e-4 absolute) in the
# gradients and 1e-3 to 2e-2 in the parameters after 3 steps; float16 parameters and plain float32
# by ~2e-2 in the parameters.
TOLERANCE = {2: {"grads": (0.0, 0.0), "params": (0.0, 0.0)}, 4: {"grads": (1e-4, 1e-8), "params": (1e-5, 1e-6)}}
LOSS_TOLERANCE = (0.0, 0.0)  # each rank's forward is its own: bit for bit at every world size
# The measured step: every unit all-gathers its bfloat16 parameters (the root once, each block
# again for its backward) and reduce-scatters its float32 gradients. Bounds on each rank's bytes.
HIGH, LOW = 1.05, 0.95
FRAMING = 8192
DRIVER = load_public(__file__, "driver")


def shards(world_size: int, gen: torch.Generator) -> list[dict[str, Any]]:
    """Every rank's inputs: its own rows of every parameter (the rows FSDP keeps on it) and its own shard
    of each step's batch.

    Each from that rank's own generator, so no rank can work out another's parameters or data: the
    model runs only once FSDP has gathered the rows, and the averaged gradients exist only once the
    ranks have reduced them. Weights and biases uniform in +-1/sqrt(width), the norm's scale 1 + 0.1 N(0, 1).
    """
    own = training.secret_generators(gen, world_size)
    settings = {"key": "mp", "dims": DIMS, "steps": STEPS, "lr": LR, "weight_decay": WEIGHT_DECAY}
    per, width = BATCH // world_size, DIMS["width"]
    bound = width**-0.5
    shapes = {name: tuple(p.shape) for name, p in DRIVER.Net(width, DIMS["blocks"]).named_parameters()}
    out = []
    for r in range(world_size):
        params = {}
        for name, shape in shapes.items():
            span = DRIVER.rows(shape[0], world_size, r)
            mine = (span.stop - span.start, *shape[1:])
            if name.startswith("norm."):
                params[name] = 1.0 + 0.1 * torch.randn(mine, generator=own[r])
            else:
                params[name] = (torch.rand(mine, generator=own[r]) * 2 - 1) * bound
        xs = [torch.randn(per, width, generator=own[r]) for _ in range(STEPS)]
        ys = [torch.randn(per, width, generator=own[r]) for _ in range(STEPS)]
        out.append({**settings, "params": params, "x": xs, "y": ys})
    return out


def _first_losses(emulated: Future[dict[str, Any]], world_size: int) -> list[dict[str, Any]]:
    want = emulated.result()
    return [{"loss": want["losses"][r][0]} for r in range(world_size)]


def _trained(emulated: Future[dict[str, Any]], world_size: int) -> list[dict[str, Any]]:
    want = emulated.result()
    return [{"grads": want["grads"], "params": want["params"]}] * world_size


def cases(world_size: int, gen: torch.Generator) -> list[Case]:
    inputs = shards(world_size, gen)
    emulated = later(DRIVER.emulate, inputs)
    # Only the loss is scored; the dtypes the driver saw come from inside the rank and only help the hints.
    losses = later(_first_losses, emulated, world_size)
    label = f"the first training step on a global batch of {BATCH}"
    parts, tolerance = {"forward": ["loss"]}, {"loss": LOSS_TOLERANCE}
    step = Case("forward", "wrap", label, inputs, losses, measure=True, driver="step", parts=parts, tolerance=tolerance)
    trained = later(_trained, emulated, world_size)
    label, rows = f"{STEPS} AdamW steps on a global batch of {BATCH}", [dict(i) for i in inputs]
    parts, tolerance = {"gradients": ["grads"], "parameters": ["params"]}, TOLERANCE.get(world_size, TOLERANCE[4])
    return [step, Case("gradients", "wrap", label, rows, trained, driver="finish", parts=parts, tolerance=tolerance)]


# --- hints: which wrong policy do the numbers match? -----------------------------------------


def _matches(got: Any, want: dict[str, torch.Tensor]) -> bool:
    return isinstance(got, dict) and all(
        isinstance(g := got.get(name), torch.Tensor)
        and g.shape == w.shape
        and g.dtype == w.dtype
        and torch.allclose(g, w, rtol=1e-5, atol=1e-7)
        for name, w in want.items()
    )


_FLOAT32: dict[str, dict[str, Any]] = {}


def _float32(case: Case) -> dict[str, Any]:
    """The emulation of ``case``'s training in plain float32 (cached by the case's data)."""
    digest = hashlib.sha256()
    for inputs in case.inputs:
        for x in (*inputs["params"].values(), *inputs["x"]):
            digest.update(x.numpy().tobytes())
    key = digest.hexdigest()
    if key not in _FLOAT32:
        if len(_FLOAT32) >= 32:
            _FLOAT32.clear()
        _FLOAT32[key] = DRIVER.emulate(case.inputs, param_dtype=None)
    return _FLOAT32[key]


def _dtypes(g: Any, rank: int) -> dict[str, Any] | None:
    """The dtypes this rank's measured step saw, if it returned them."""
    got = result(g, next(j for j, c in enumerate(g.cases) if c.driver == "step"), rank)
    dtypes = got.get("dtypes") if isinstance(got, dict) else None
    return dtypes if isinstance(dtypes, dict) else None


def _diagnosis(g: Any, i: int, case: Case, rank: int, key: str) -> str:
    got = result(g, i, rank)
    if not isinstance(got, dict) or not isinstance(got.get(key), dict):
        return ""
    grads = list(got["grads"].values()) if isinstance(got.get("grads"), dict) else []
    if grads and all(
        isinstance(t, torch.Tensor) and t.dtype == torch.float32 and torch.equal(t, t.to(torch.bfloat16).float())
        for t in grads
    ):
        return (
            " Every averaged gradient is a bfloat16 number: the ranks' gradients were reduced in bfloat16."
            " Set reduce_dtype=torch.float32 (without it, FSDP reduces in param_dtype)."
        )
    fp32 = _float32(case)[key]
    if _matches(got[key], fp32):
        return " These are the numbers of full float32 training: no mixed-precision policy reached the units."
    compute = (_dtypes(g, rank) or {}).get("compute_dtype")
    if compute in ("torch.float16", "torch.float32"):
        return (
            f" The Linear layers computed in {compute.removeprefix('torch.')} (see the forward check):"
            " the policy asks for param_dtype=torch.bfloat16."
        )
    dist = max(float((fp32[n] - case.expected[rank][key][n]).abs().max()) for n in fp32)
    return (
        " Mixed precision changes the numbers on purpose: the target is bfloat16 forward and backward,"
        f" float32 gradient averaging and float32 AdamW (full float32 training differs from it by {dist:.2g})."
    )


def _judge(facts: Facts, check: str, key: str) -> Outcome:
    return training.judge(
        facts, check, lambda g, i, case, r: _diagnosis(g, i, case, r, key), success="the emulated mixed-precision run"
    )


def gradients(facts: Facts) -> Outcome:
    return _judge(facts, "gradients", "grads")


def parameters(facts: Facts) -> Outcome:
    return _judge(facts, "parameters", "params")


def _forward_hint(g: Any, i: int, case: Case, rank: int) -> str:
    dtypes = _dtypes(g, rank)
    if dtypes is None:
        return ""
    loss = result(g, i, rank).get("loss")
    if isinstance(loss, torch.Tensor) and loss.numel() == 1 and bool(loss.isnan()):
        return (
            " The loss is NaN: each rank is given only its own rows of every parameter (the others are NaN"
            " until FSDP gathers them), so the model must run sharded: fully_shard every block, then the root."
        )
    compute = dtypes.get("compute_dtype")
    if compute == "torch.float32":
        return (
            " The Linear layers computed in float32: give every fully_shard call"
            " mp_policy=MixedPrecisionPolicy(param_dtype=torch.bfloat16, reduce_dtype=torch.float32)."
        )
    if compute == "torch.float16":
        return " The Linear layers computed in float16: the policy asks for param_dtype=torch.bfloat16."
    if dtypes.get("master_dtype") != "torch.float32":
        return (
            " The sharded parameters (the master weights the optimizer updates) must stay float32:"
            " let the policy cast them for the forward, do not cast the model."
        )
    return " The first step's loss must be the bfloat16 forward's, computed from the same bfloat16 weights."


def forward(facts: Facts) -> Outcome:
    outcome = training.judge(facts, "forward", _forward_hint, success="the emulated bfloat16 forward")
    if not outcome.passed and "must have the same dtype" in outcome.message:
        outcome.message += (
            " A unit without the policy received bfloat16 activations from one with it (or the other way round):"
            " pass the same mp_policy to every fully_shard call, the blocks' and the root's."
        )
    return outcome


def communication(facts: Facts) -> Outcome:
    data: dict[str, Any] = {}

    def verdict(g: GroupRun, i: int, case: Case, sent: list[int]) -> str | None:
        n = g.world_size
        if not training.finished(g, i):
            return "the step did not finish on every rank, so its bytes say nothing"
        gather, reduce = expected_bytes(case.inputs[0], n)
        theory = gather + reduce
        data[f"world_size_{n}"] = {
            "all_gather_bf16_bytes_per_rank": round(gather),
            "reduce_scatter_fp32_bytes_per_rank": round(reduce),
            "measured_bytes_per_rank": sent,
            "ratio": [round(s / theory, 4) for s in sent],
        }
        off = wire.outside(sent, theory, (HIGH, LOW, FRAMING))
        if off is None:
            return None
        parts = (
            f"all-gathering bfloat16 parameters ({round(gather):,} bytes per rank) and reduce-scattering"
            f" float32 gradients ({round(reduce):,}) sends {round(theory):,}"
        )
        return f"{wire.compared(*off, theory, parts, during=' in one step')}. {_likely(off[1], case.inputs[0], n)}"

    return wire.judge(
        [(g, i, c) for g in facts.groups for i, c in enumerate(g.cases) if c.measure],
        verdict,
        success="each rank gathered bfloat16 parameters and reduced float32 gradients: the expected bytes",
        call="step",
        right=_step_right,
        wrong="the first step's loss or gradients are wrong (see those checks)",
        data=data,
        shown=2,
    )


def _step_right(g: Any, i: int) -> bool:
    """The measured step's loss (case ``i``) and its gradients (the group's finishing case) are right on every rank."""
    finish = [k for k, c in enumerate(g.cases) if c.judges("gradients")]
    return training.values_right(g, i, ("forward",)) and all(
        training.values_right(g, k, ("gradients",)) for k in finish
    )


def _likely(sent: float, inputs: dict[str, Any], world_size: int) -> str:
    """What the bytes show, by the pattern whose count is nearest to what was sent, and what could cause it.

    Bytes tell element sizes and how often parameters were gathered, never a dtype (bfloat16 and
    float16 are both 2 bytes) nor how the units were made: the causes are offered as possibilities.
    """
    gather, reduce = expected_bytes(inputs, world_size)
    root_only = expected_bytes(inputs, world_size, blocks_are_units=False)[0]
    patterns = {
        "parameters gathered in 4-byte elements, twice the all-gather bytes of 2-byte ones (possibly"
        " param_dtype left at float32, on some units or all: set param_dtype=torch.bfloat16)": 2 * gather + reduce,
        "gradients reduced in 2-byte elements, half the reduce-scatter bytes of float32 ones (possibly reduced in"
        " bfloat16 or float16: set reduce_dtype=torch.float32)": gather + reduce / 2,
        "every parameter gathered once and never again for the backward (possibly no block is a unit of its own:"
        " fully_shard every block before the root; or the blocks' units are not resharded after their forward)": (
            root_only + reduce
        ),
    }
    theory = gather + reduce
    # Only the patterns on the side the bytes are on: more bytes are never explained by a pattern of fewer.
    side = [m for m, b in patterns.items() if (b > theory) == (sent > theory)]
    if not side:
        return "These bytes match no single known mistake."
    nearest = min(side, key=lambda m: abs(patterns[m] - sent))
    text = f"These bytes are nearest to the pattern of {nearest}: {round(patterns[nearest]):,} bytes per rank."
    if sent > theory:
        text += " More units than one per block would also send more: each is gathered again for the backward."
    return text


def expected_bytes(inputs: dict[str, Any], world_size: int, *, blocks_are_units: bool = True) -> tuple[float, float]:
    """Per rank, one step: (all-gather bytes of bfloat16 parameters, reduce-scatter bytes of float32 gradients).

    The root unit (embed, norm, head) is gathered once; each block again for its backward. gloo's
    reduce-scatter sends as much as an all-reduce: 2(N-1)/N of the gradients.
    """
    model = DRIVER.Net(inputs["dims"]["width"], inputs["dims"]["blocks"])
    elements = {name: p.numel() for name, p in model.named_parameters()}
    blocks = sum(v for k, v in elements.items() if k.startswith("blocks."))
    root = sum(elements.values()) - blocks
    n = world_size
    gather = (n - 1) / n * (root + (2 if blocks_are_units else 1) * blocks) * 2
    reduce = 2 * (n - 1) / n * sum(elements.values()) * 4
    return gather, reduce


RULES = {"forward": forward, "gradients": gradients, "parameters": parameters, "communication": communication}
