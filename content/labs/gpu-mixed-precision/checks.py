"""Trusted checks for gpu-mixed-precision: per-submission sizes, the reference run, the rules.

Never mounted into the sandbox. The reference is the lab's own ``solution.py`` run through this
lab's copy of the public driver, here in the worker, on the worker's GPU: float16 matmuls give
results that depend on the hardware, so a CPU reference could not be compared closely. The
grader only calls ``cases`` on a worker that took the job, and so has a GPU (``needs_gpu``).

Points come only from results compared with that reference: the losses, the parameters, and the
scaler's scale and skipped steps (float16 autocast is what makes the spiked step overflow, so a
step without it, or in bfloat16, shows there). The Linear layers' output dtypes (the driver's
forward hooks) and the benchmark's time and peak memory (``torch.cuda.max_memory_allocated``) are
read inside the rank, where the student's code can rewrite them: those two checks are feedback,
worth no points.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path
from types import ModuleType
from typing import Any

import torch

from labs.authoring import Case, Facts, Outcome, load_public, result, training

STEPS = 10
SPIKE_STEP = 4  # this batch is multiplied by SPIKE: its scaled gradients overflow float16
SPIKE = 1000.0
INIT_SCALE, GROWTH_INTERVAL = 2.0**16, 3
LR, MAX_NORM = 0.05, 1.0
# Same GPU, same kernels: the reference and a correct step agree to rounding. A step that is not
# skipped, or a gradient that is clipped while scaled, moves parameters by ~lr, far outside.
TOLERANCE = (1e-3, 1e-5)
BENCHMARK = {"d_in": 1024, "hidden": 4096, "classes": 1024, "batch": 8192, "repeats": 5}
# Peak above the parameters: float32 keeps gradients, momentum (8P, 200 MiB) and ~600 MiB of float32 activations;
# autocast keeps float16 activations and float16 copies of the weights: about 0.75 of that. Without autocast: 1.0.
MEMORY_RATIO = 0.9
FP16 = {"fc1": "torch.float16", "fc2": "torch.float16", "fc3": "torch.float16", "parameters": "torch.float32"}

HINTS = {
    "losses": (
        "Return the loss of the forward pass as computed under autocast (float32 from cross_entropy), detached and "
        "unscaled: not scaler.scale(loss)."
    ),
    "parameters": (
        "Zero the gradients first, backward the scaled loss (scaler.scale(loss).backward()), call "
        "scaler.unscale_(optimizer) before clip_grad_norm_, then scaler.step(optimizer) (it skips a step whose "
        "gradients overflowed) and scaler.update()."
    ),
    "autocast-fp16": (
        "Run the forward pass and the loss inside torch.autocast(device_type='cuda', dtype=torch.float16), and keep "
        "the model in float32 (no model.half()): autocast casts each Linear's inputs to float16 on the fly."
    ),
    "loss-scaling": (
        "Let the GradScaler skip steps and move the scale: scaler.step(optimizer) skips the update when a gradient is "
        "inf or NaN, and scaler.update() then halves the scale (doubling it after growth_interval good steps)."
    ),
}


def _solution() -> ModuleType:
    """The reference solution (trusted, beside this file), imported under a name of its own."""
    path = Path(__file__).with_name("solution.py")
    spec = importlib.util.spec_from_file_location("ringlab_solution_gpu_mixed_precision", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def config(gen: torch.Generator) -> dict[str, Any]:
    """One submission's sizes and seed, drawn fresh."""

    def pick(options: list[int]) -> int:
        return options[int(torch.randint(0, len(options), (1,), generator=gen))]

    seed = int(torch.randint(0, 2**31 - 1, (1,), generator=gen))
    return {
        "seed": seed, "d_in": pick([32, 64]), "hidden": pick([64, 128]), "classes": pick([8, 10, 16]),
        "batch": pick([64, 96, 128]), "steps": STEPS, "spike_step": SPIKE_STEP, "spike": SPIKE, "lr": LR,
        "init_scale": INIT_SCALE, "growth_interval": GROWTH_INTERVAL, "max_norm": MAX_NORM,
    }  # fmt: skip


def reference(inputs: dict[str, Any]) -> dict[str, Any]:
    """The reference run (no benchmark), on this process's GPU."""
    driver = load_public(__file__, "driver")
    expected = driver.train(_solution(), {**inputs, "benchmark": None})
    out = {k: v for k, v in expected.items() if k != "dtypes"}
    out = {k: ({n: t.cpu() for n, t in v.items()} if isinstance(v, dict) else v.cpu()) for k, v in out.items()}
    if torch.cuda.is_available():
        torch.cuda.empty_cache()
    return {**out, "dtypes": dict(FP16)}


def cases(world_size: int, gen: torch.Generator) -> list[Case]:
    inputs = config(gen)
    expected = reference(inputs)
    bench = {**BENCHMARK, "seed": inputs["seed"]}
    label = (
        f"{STEPS} AMP steps of an MLP {inputs['d_in']}-{inputs['hidden']}-{inputs['hidden']}-{inputs['classes']}"
        f" (batch {inputs['batch']}; batch {SPIKE_STEP} scaled by {SPIKE:g})"
    )
    return [
        Case(
            check="losses",
            fn="amp_train_step",
            driver="train",
            label=label,
            inputs=[{**inputs, "benchmark": bench} for _ in range(world_size)],
            expected=[expected for _ in range(world_size)],
            parts={
                "losses": ["losses"],
                "parameters": ["params"],
                "autocast-fp16": ["dtypes"],
                "loss-scaling": ["skipped", "scales"],
            },
            tolerance={"losses": TOLERANCE, "params": TOLERANCE, "scales": (0.0, 0.0)},
        )
    ]


def _losses_hint(g: Any, i: int, case: Case, r: int) -> str:
    """A wrong first loss is the forward pass or what is returned; a later one follows wrong updates."""
    tree = result(g, i, r)
    got, want = tree.get("losses") if isinstance(tree, dict) else None, case.expected[r]["losses"]
    first_right = isinstance(got, torch.Tensor) and got.numel() > 0 and torch.isclose(got[0], want[0], *TOLERANCE)
    if first_right:
        return (
            "The first step's loss is right, so the forward pass is: the later losses differ because the updates do "
            "(see the parameters and loss scaling checks)."
        )
    return HINTS["losses"]


FEEDBACK = " This check is feedback: it is measured inside your own process, so it cannot count (no points either way)."


def _judge(check: str) -> Any:
    hint: training.Hint = _losses_hint if check == "losses" else HINTS[check]

    def rule(facts: Facts) -> Outcome:
        return training.judge(facts, check, hint, success="the reference run's")

    return rule


def _feedback(rule: Any) -> Any:
    """``rule``'s outcome, said to be feedback: what it reads was measured inside the rank."""

    def feedback(facts: Facts) -> Outcome:
        o = rule(facts)
        return Outcome(o.passed, o.message.rstrip(".") + "." + FEEDBACK, {**o.data, "feedback": True}, o.fraction)

    return feedback


def _mib(n: float) -> str:
    return f"{n / (1 << 20):,.1f} MiB"


def memory(facts: Facts) -> Outcome:
    """Feedback: speed and peak memory against float32, as the driver measured them in the rank."""
    figures = None
    for g in facts.groups:
        for i, _case in enumerate(g.cases):
            tree = result(g, i, 0)
            if isinstance(tree, dict) and isinstance(tree.get("benchmark"), dict):
                figures = tree["benchmark"]
    try:
        fp32, amp = figures["fp32"], figures["amp"]  # type: ignore[index]
        ms32, msamp = float(fp32["ms_per_step"]), float(amp["ms_per_step"])
        mem32, memamp = float(fp32["peak_extra_bytes"]), float(amp["peak_extra_bytes"])
    except (TypeError, KeyError, ValueError):
        return Outcome(
            False,
            "the comparison with float32 did not run: training did not finish, so fix the error that the losses "
            "check shows",
            fraction=0.0,
        )
    table = {
        "caption": f"One training step of an MLP {BENCHMARK['d_in']}-{BENCHMARK['hidden']}-{BENCHMARK['hidden']}-"
        f"{BENCHMARK['classes']} on a batch of {BENCHMARK['batch']}, measured in your run",
        "columns": ["", "time per step", "peak memory above the parameters"],
        "rows": [
            ["float32", f"{ms32:.2f} ms", _mib(mem32)],
            ["your AMP step", f"{msamp:.2f} ms", _mib(memamp)],
            ["AMP / float32", f"{msamp / ms32:.2f}x" if ms32 > 0 else "-", f"{memamp / mem32:.2f}x" if mem32 else "-"],
        ],
    }
    figures_text = f"float32 {ms32:.2f} ms and {_mib(mem32)} per step; your AMP step {msamp:.2f} ms and {_mib(memamp)}"
    data = {"table": table, "figures": figures}
    if mem32 > 0 and memamp < MEMORY_RATIO * mem32:
        return Outcome(True, f"{figures_text}: mixed precision keeps float16 activations, so it needs less", data)
    return Outcome(
        False,
        f"{figures_text}: your step needs more than {MEMORY_RATIO:.0%} of float32's memory. Under autocast the "
        "activations kept for the backward pass are float16, half the bytes: run the forward pass inside "
        "torch.autocast(dtype=float16).",
        data,
        fraction=0.0,
    )


RULES = {
    "losses": _judge("losses"),
    "parameters": _judge("parameters"),
    "autocast-fp16": _feedback(_judge("autocast-fp16")),
    "loss-scaling": _judge("loss-scaling"),
    "memory": _feedback(memory),
}
