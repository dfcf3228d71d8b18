"""Trusted checks for memory-estimate: per-submission model sizes, the grader's own figures, the rules.

Never mounted into the sandbox. The expected figures are computed here, on this lab's own copy
of the public driver's models: parameters, gradients and AdamW state by counting (every
trainable parameter has one gradient and two moments of its size: tests/labs/test_memory_estimate.py
checks that against a real backward and a real ``torch.optim.AdamW`` step), activations by the
driver's ``saved_tensors_hooks`` count run here. Nothing measured in the rank is judged: only
the student's figures (results) come back, and they are compared with these.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import torch

from labs.authoring import Case, Facts, Outcome, load_public, result, tallies

FIGURES = ("parameters", "gradients", "optimizer_state", "activations")
VARIANTS = (("plain", False), ("checkpointed", True))
EXACT = 0.01  # parameters, gradients, optimizer state: relative tolerance
ACTIVATIONS = 0.20  # activations: relative tolerance
REDUCTION = 0.25  # checkpointing's saving: relative tolerance


def _configs(gen: torch.Generator) -> list[dict[str, Any]]:
    def pick(options: list[int]) -> int:
        return options[int(torch.randint(0, len(options), (1,), generator=gen))]

    seed = int(torch.randint(0, 2**31 - 1, (1,), generator=gen))
    two_tower = {
        "model": "TwoTowerModel", "seed": seed, "users": pick([600, 800, 1000, 1200]),
        "items": pick([1500, 2000, 2500]), "dim": pick([16, 32]), "hidden": pick([64, 128]),
        "batch": pick([128, 192, 256, 384]),
    }  # fmt: skip
    transformer = {
        "model": "CheckpointedTransformer", "seed": seed + 1, "vocab": pick([128, 256]), "dim": pick([32, 64]),
        "heads": 4, "layers": pick([3, 4, 5]), "context": 64, "batch": pick([2, 3, 4]), "tokens": pick([16, 24, 32]),
    }  # fmt: skip
    return [two_tower, transformer]


def expected_figures(config: dict[str, Any], checkpointing: bool) -> dict[str, int]:
    """The figures for one model and flag, computed here (trusted)."""
    driver = load_public(__file__, "driver")
    model = driver.build_model(config)
    params = list(model.parameters())
    parameters = sum(p.numel() * p.element_size() for p in params)
    gradients = sum(p.numel() * p.element_size() for p in params if p.requires_grad)
    model.checkpointing = checkpointing
    activations, _ = driver.activation_bytes(model, driver.make_batch(config))
    figures = {"parameters": parameters, "gradients": gradients, "optimizer_state": 2 * gradients}
    figures["activations"] = activations
    return {**figures, "total": sum(figures.values())}


def _label(c: dict[str, Any]) -> str:
    if c["model"] == "TwoTowerModel":
        sizes = f"users {c['users']}, items {c['items']}, dim {c['dim']}, hidden {c['hidden']}"
        return f"TwoTowerModel ({sizes}; batch of {c['batch']} pairs)"
    sizes = f"{c['layers']} blocks, dim {c['dim']}, vocab {c['vocab']}"
    return f"CheckpointedTransformer ({sizes}; batch {c['batch']} x {c['tokens']} tokens)"


def cases(world_size: int, gen: torch.Generator) -> list[Case]:
    out = []
    for config in _configs(gen):
        expected = {name: expected_figures(config, flag) for name, flag in VARIANTS}
        out.append(
            Case(
                check="parameters",
                fn="estimate_memory_consumption",
                driver="estimate",
                label=_label(config),
                inputs=[config],
                expected=[{"figures": expected}],  # computed here: the student's estimates are compared with it
            )
        )
    return out


def _b(n: float) -> str:
    return f"{n:,.0f} bytes"


class Pair:
    """One model and one flag: the student's figures next to the expected ones."""

    def __init__(self, case: Case, variant: str, tree: Any) -> None:
        self.case, self.variant = case, variant
        self.want: dict[str, int] = case.expected[0]["figures"][variant]
        self.other: dict[str, int] = case.expected[0]["figures"]["checkpointed" if variant == "plain" else "plain"]
        self.where = f"{case.label}, checkpointing={variant == 'checkpointed'}"
        self.problem: str | None = None
        self.got: dict[str, Any] = {}
        if not isinstance(tree, dict):
            self.problem = "the driver returned no result (see the error above)"
            return
        estimates = tree.get("estimate")
        got = estimates.get(variant) if isinstance(estimates, dict) else None
        self.got = got if isinstance(got, dict) else {}
        if not isinstance(got, dict):
            self.problem = "the driver returned no estimate (see the error above)"
        elif "error" in got:
            self.problem = f"estimate_memory_consumption {got['error']}"

    def value(self, key: str) -> float | str:
        v = self.got.get(key)
        return v if isinstance(v, float | int) else str(v)


def _pairs(facts: Facts) -> Iterator[Pair]:
    for g in facts.groups:
        for i, case in enumerate(g.cases):
            for variant, _ in VARIANTS:
                yield Pair(case, variant, result(g, i, 0))


def _judge(facts: Facts, why: Callable[[Pair], str | None], success: str) -> Outcome:
    """Partial credit over (model, flag) pairs; the first failure in full."""
    tally = tallies.Tally(unit="estimate")
    for pair in _pairs(facts):
        reason = pair.problem or why(pair)
        tally.add(reason and f"{pair.where}: {reason}")
    return tally.outcome(success, {"failures": tally.problems} if tally.problems else None)


def _off(got: float, want: float, tolerance: float) -> bool:
    return abs(got - want) > tolerance * abs(want)


def _exact(key: str, what: str, zero: str = "", half: str = "") -> Callable[[Pair], str | None]:
    """Within EXACT of the expected bytes; ``zero`` and ``half`` advise on an estimate of 0 or of half of it."""

    def why(pair: Pair) -> str | None:
        got, want = pair.value(key), pair.want[key]
        if isinstance(got, str):
            return f'"{key}" is {got}, not a number of bytes'
        if not _off(got, want, EXACT):
            return None
        hint = ""
        if abs(got * 4 - want) <= EXACT * want:
            hint = " That is a quarter of it: you counted elements, not bytes; multiply by p.element_size() (4 for"
            hint += " float32)."
        elif half and abs(2 * got - want) <= EXACT * want:
            hint = half
        elif got == 0:
            hint = zero
        return f'"{key}" is {_b(got)}, expected {_b(want)} ({what}).{hint}'

    return why


def parameters(facts: Facts) -> Outcome:
    why = _exact("parameters", "the bytes of every parameter")
    return _judge(facts, why, "the parameter bytes are right for both models")


def gradients(facts: Facts) -> Outcome:
    zero = " Training keeps one gradient per trainable parameter, of its size and dtype: count them."
    why = _exact("gradients", "one .grad per trainable parameter after backward", zero)
    return _judge(facts, why, "the gradient bytes are right for both models")


def optimizer_state(facts: Facts) -> Outcome:
    why = _exact(
        "optimizer_state",
        "exp_avg and exp_avg_sq after one AdamW step",
        zero=" AdamW keeps exp_avg and exp_avg_sq for every trainable parameter: count them.",
        half=" That is half: AdamW keeps TWO moments per parameter, exp_avg and exp_avg_sq, each the size of the"
        " parameter, so its state is twice the parameters' bytes.",
    )
    return _judge(facts, why, "AdamW's state bytes are right for both models")


def activations(facts: Facts) -> Outcome:
    def why(pair: Pair) -> str | None:
        got, want = pair.value("activations"), pair.want["activations"]
        if isinstance(got, str):
            return f'"activations" is {got}, not a number of bytes'
        if not _off(got, want, ACTIVATIONS):
            return None
        message = (
            f'"activations" is {_b(got)}, expected {_b(want)} within {ACTIVATIONS:.0%} (the distinct storages autograd'
            " saves for backward during model(batch), parameters excluded)."
        )
        if pair.variant == "checkpointed" and not _off(got, pair.other["activations"], 0.02):
            message += (
                " That is the figure without checkpointing: set model.checkpointing = checkpointing before your"
                " forward pass (and restore it after), so that the blocks run under torch.utils.checkpoint."
            )
        elif got == 0:
            message += (
                " Run model(batch) inside torch.autograd.graph.saved_tensors_hooks(pack, unpack) and add up the"
                " bytes of the storages that pack() is given."
            )
        elif 0 < got < want / 2:
            message += (
                f" Far too small: activations grow with the batch ({pair.case.inputs[0]['batch']} examples here);"
                " run the forward pass on the whole batch you are given, or multiply a per-example figure by its size."
            )
        elif got > want:
            message += (
                " Too large: count each storage once (t.untyped_storage().data_ptr() as the key, its nbytes() as"
                " the size) and leave out the parameters' own storages, which autograd also saves."
            )
        return message

    return _judge(
        facts, why, "the activation estimates are within 20% of the measured bytes, with and without checkpointing"
    )


def _saving_problem(plain: Pair, ckpt: Pair) -> str | None:
    """What is wrong with the saving the student's two activation estimates of one model show, or None."""
    got_plain, got_ckpt = plain.value("activations"), ckpt.value("activations")
    if plain.problem or ckpt.problem:
        return plain.problem or ckpt.problem
    if isinstance(got_plain, str) or isinstance(got_ckpt, str):
        return '"activations" is not a number of bytes'
    before, after = plain.want["activations"], ckpt.want["activations"]
    if not got_ckpt < got_plain:
        return (
            f"with checkpointing your activation estimate is {_b(got_ckpt)}, not less than without ({_b(got_plain)});"
            f" measured, checkpointing saves {_b(before - after)} ({(before - after) / before:.0%}). Estimate with"
            " model.checkpointing set to the flag"
        )
    if _off(got_plain - got_ckpt, before - after, REDUCTION):
        return (
            f"your estimates say checkpointing saves {_b(got_plain - got_ckpt)} ({_b(got_plain)} -> {_b(got_ckpt)}),"
            f" measured it saves {_b(before - after)} ({_b(before)} -> {_b(after)}); they must agree within"
            f" {REDUCTION:.0%}"
        )
    return None


def checkpointing(facts: Facts) -> Outcome:
    tally = tallies.Tally()
    data: dict[str, Any] = {}
    for g in facts.groups:
        for i, case in enumerate(g.cases):
            plain, ckpt = (Pair(case, v, result(g, i, 0)) for v, _ in VARIANTS)
            saving = plain.want["activations"] - ckpt.want["activations"]
            data[case.label] = {
                "measured_saving": saving,
                "estimated": [plain.value("activations"), ckpt.value("activations")],
            }
            problem = _saving_problem(plain, ckpt)
            tally.add(problem and f"{case.label}: {problem}")
    success = "checkpointing reduces your activation estimates as much as it reduces the measured bytes"
    return tally.outcome(success, data, shown=len(tally.problems))


def total_(facts: Facts) -> Outcome:
    def why(pair: Pair) -> str | None:
        got = [pair.value(k) for k in (*FIGURES, "total")]
        if any(isinstance(v, str) for v in got):
            return "a figure is not a number of bytes"
        *parts, total = (float(v) for v in got)
        want = pair.want["total"]
        if abs(total - sum(parts)) > 0.005 * max(sum(parts), 1.0):
            return f'"total" is {_b(total)} but your four figures add up to {_b(sum(parts))}: total is their sum'
        allowance = EXACT * sum(pair.want[k] for k in FIGURES[:3]) + ACTIVATIONS * pair.want["activations"]
        if abs(total - want) > allowance:
            return (
                f'"total" is {_b(total)}, measured {_b(want)}: more than the figures\' allowances together'
                f" ({_b(allowance)}: 1% of parameters, gradients and optimizer state, 20% of activations)"
                " allow; fix the figures the other checks show"
            )
        return None

    return _judge(facts, why, "the totals add up and are within the figures' allowances of the measured totals")


RULES = {
    "parameters": parameters,
    "gradients": gradients,
    "optimizer-state": optimizer_state,
    "activations": activations,
    "checkpointing": checkpointing,
    "total": total_,
}
