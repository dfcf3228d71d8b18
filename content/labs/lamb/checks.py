"""Trusted checks for lamb: per-submission inputs, a float64 LAMB written here, the rules.

Never mounted into the sandbox. The reference LAMB below is independent of the student's
``torch.optim.Optimizer`` machinery: it runs on this lab's own copy of the public driver's model
and data, with the exercise's update rule written out step by step.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable, Iterable
from typing import Any

import torch

from labs.authoring import Case, Facts, Outcome, case_failure, load_public, off_by, result, tensor_difference, training

DIMS = [16, 48, 32, 4]  # the graded 3-layer MLP; its three biases start at zero
BATCH = 64
STEPS = 5
HYPER: dict[str, Any] = {"lr": 0.02, "betas": (0.9, 0.999), "eps": 1e-6, "weight_decay": 0.1}
CURVES = {
    "curve_dims": [8, 32, 32, 1],
    "batches": [32, 256, 2048],  # the exercise's 256, 2048, 16384 scaled down 8 times
    "curve_size": 2048,
    "curve_steps": 20,
    "curve_lr": 0.02,  # at batch 32; sqrt-scaled with the batch size
    "curve_weight_decay": 0.01,
}
TOLERANCE = (1e-9, 1e-12)  # (rtol, atol) in float64
CURVE_TOLERANCE = (1e-6, 1e-9)


def ratio(wn: float, un: float) -> float:
    """LAMB's trust ratio ||w|| / ||u|| from the two norms: 1 when either is 0."""
    return wn / un if wn > 0 and un > 0 else 1.0


class ReferenceLamb:
    """LAMB as the exercise states it, float64, one trust ratio per parameter tensor."""

    def __init__(self, params: Iterable[torch.Tensor], lr: float, betas: tuple[float, float] = (0.9, 0.999),
                 eps: float = 1e-6, weight_decay: float = 0.0) -> None:  # fmt: skip
        self.params = list(params)
        self.lr, self.betas, self.eps, self.weight_decay = lr, betas, eps, weight_decay
        self.m = [torch.zeros_like(p) for p in self.params]
        self.v = [torch.zeros_like(p) for p in self.params]
        self.t = 0

    def zero_grad(self) -> None:
        for p in self.params:
            p.grad = None

    def step(self, closure: Callable[[], torch.Tensor] | None = None) -> torch.Tensor | None:
        loss = closure() if closure is not None else None
        self.t += 1
        beta1, beta2 = self.betas
        with torch.no_grad():
            for p, m, v in zip(self.params, self.m, self.v, strict=True):
                g = p.grad
                if g is None:  # as torch's optimizers do: a parameter without a gradient is left alone
                    continue
                m.copy_(beta1 * m + (1 - beta1) * g)
                v.copy_(beta2 * v + (1 - beta2) * g * g)
                m_hat, v_hat = m / (1 - beta1**self.t), v / (1 - beta2**self.t)
                u = m_hat / (v_hat.sqrt() + self.eps) + self.weight_decay * p
                p.sub_(self.lr * ratio(float(p.norm()), float(u.norm())) * u)
        return loss


def reference(inputs: dict[str, Any]) -> dict[str, Any]:
    """The graded run and the LAMB convergence runs, with ``ReferenceLamb``."""
    driver = load_public(__file__, "driver")
    model = driver.build_model(int(inputs["seed"]), list(inputs["dims"]))
    optimizer = ReferenceLamb(model.parameters(), lr=inputs["lr"], betas=tuple(inputs["betas"]),
                              eps=inputs["eps"], weight_decay=inputs["weight_decay"])  # fmt: skip
    trained = training.train_steps(driver, model, optimizer, inputs)
    wd = float(inputs["curve_weight_decay"])
    lamb = [
        driver.run_curve(lambda p, lr: ReferenceLamb(p, lr=lr, weight_decay=wd), inputs, int(size))
        for size in inputs["batches"]
    ]
    return {**trained, "curves": {"lamb": torch.tensor(lamb, dtype=torch.float64)}}


def cases(world_size: int, gen: torch.Generator) -> list[Case]:
    seed = int(torch.randint(0, 2**31 - 1, (1,), generator=gen))
    inputs = {"seed": seed, "dims": DIMS, "batch": BATCH, "steps": STEPS, **HYPER, **CURVES}
    label = f"{STEPS} LAMB steps of an MLP {'-'.join(map(str, DIMS))} with zero biases"
    parts = {"first-step": ["first"], "parameters": ["params"], "convergence": ["curves"]}
    tolerance = {"first": TOLERANCE, "params": TOLERANCE, "curves": CURVE_TOLERANCE}
    each, expected = [dict(inputs) for _ in range(world_size)], [reference(inputs)] * world_size
    return [Case("first-step", "Lamb", label, each, expected, driver="train", parts=parts, tolerance=tolerance)]


# ---------------------------------------------------------------------------------------------
# Rules: per-tensor partial credit, a diagnosis of the first step, the convergence picture.


def _runs(facts: Facts) -> list[tuple[Any, int, Case, int]]:
    return [(g, i, c, r) for g in facts.groups for i, c in enumerate(g.cases) for r in range(g.world_size)]


def _right(got: Any, want: torch.Tensor, tol: tuple[float, float] = TOLERANCE) -> bool:
    return (
        isinstance(got, torch.Tensor)
        and got.shape == want.shape
        and bool(torch.isfinite(got).all())
        and torch.allclose(got.to(torch.float64), want, rtol=tol[0], atol=tol[1])
    )


@functools.lru_cache(maxsize=8)  # by seed: each rule's hint asks again
def _variants(seed: int) -> dict[str, dict[str, torch.Tensor]]:
    """The first step as common mistakes compute it, per tensor."""
    driver = load_public(__file__, "driver")
    model = driver.build_model(seed, DIMS)
    x, y = driver.make_batch(seed + 1, DIMS, BATCH)
    driver.loss_fn(model, x, y).backward()
    lr, wd, eps, (b1, b2) = HYPER["lr"], HYPER["weight_decay"], HYPER["eps"], HYPER["betas"]
    w = {n: p.detach().clone() for n, p in model.named_parameters()}
    g = {n: p.grad.detach().clone() for n, p in model.named_parameters() if p.grad is not None}

    def step(u: dict[str, torch.Tensor], r: Callable[[str], float] | None = None) -> dict[str, torch.Tensor]:
        """w - lr * r * u per tensor; r the tensor's own trust ratio ||w|| / ||u|| unless given."""
        own = {n: ratio(float(w[n].norm()), float(u[n].norm())) for n in w}
        return {n: w[n] - lr * (r(n) if r else own[n]) * u[n] for n in w}

    adam = {n: g[n] / (g[n].abs() + eps) for n in w}  # m_hat / (sqrt(v_hat) + eps) at t = 1
    u = {n: adam[n] + wd * w[n] for n in w}
    l2 = {n: g[n] + wd * w[n] for n in w}
    norm = {n: (float(w[n].norm()), float(u[n].norm())) for n in w}
    whole = ratio(*(math.sqrt(sum(float(t.norm()) ** 2 for t in tree.values())) for tree in (w, u)))
    return {
        "Adam's moments are used without bias correction: divide m by 1 - beta1^t and v by 1 - beta2^t,"
        " with t counting steps from 1": step(
            {n: (1 - b1) * g[n] / (((1 - b2) * g[n] * g[n]).sqrt() + eps) + wd * w[n] for n in w}
        ),
        "the weight decay went into the gradient (L2 regularisation, as Adam does); LAMB adds"
        " weight_decay * w to the update u after the Adam ratio (decoupled)": step(
            {n: l2[n] / (l2[n].abs() + eps) for n in w}
        ),
        "eps is inside the square root: the denominator is sqrt(v_hat) + eps, not sqrt(v_hat + eps)": step(
            {n: g[n] / (g[n] * g[n] + eps).sqrt() + wd * w[n] for n in w}
        ),
        "one trust ratio is taken over all the parameters together (the norms of the whole model);"
        " LAMB takes r = ||w|| / ||u|| separately for each parameter tensor": step(u, lambda n: whole),
        "the trust ratio is inverted: r = ||w|| / ||u||, not ||u|| / ||w||": step(
            u, lambda n: ratio(norm[n][1], norm[n][0])
        ),
        "no trust ratio was applied (r = 1 for every tensor): scale each tensor's update by r = ||w|| / ||u||": step(
            u, lambda n: 1.0
        ),
        "no weight decay was applied: the update is u = m_hat / (sqrt(v_hat) + eps) + weight_decay * w": step(adam),
    }


def _close(a: Any, b: torch.Tensor) -> bool:
    return isinstance(a, torch.Tensor) and a.shape == b.shape and torch.allclose(a, b, rtol=1e-7, atol=1e-10)


def _diagnose(case: Case, got: dict[str, Any], want: dict[str, torch.Tensor], names: list[str]) -> str | None:
    """What the first step at ``names`` looks like, if it is one of the common mistakes.

    A mistake is named only where it can be told from the right answer: its variant must differ
    from the reference ``want`` at some of ``names`` (on zero-initialised biases, putting the weight
    decay into the gradient changes nothing), and there the submission must be nearer to the
    variant than to the reference. Otherwise a submission off only by rounding would be told it
    made a mistake that, at these positions, gives the right answer.
    """
    for advice, variant in _variants(int(case.inputs[0]["seed"])).items():
        differ = [n for n in names if not _close(variant[n], want[n])]
        if not differ or not all(_close(got.get(n), variant[n]) for n in names):
            continue
        if _distance(got, variant, differ) < _distance(got, want, differ):
            return f"The parameters are what you get when {advice}."
    return None


def _distance(got: dict[str, Any], to: dict[str, torch.Tensor], names: list[str]) -> float:
    """The largest absolute difference between ``got`` and ``to`` at ``names`` (infinity where one is missing)."""
    worst = 0.0
    for n in names:
        mine = got.get(n)
        if not isinstance(mine, torch.Tensor) or mine.shape != to[n].shape:
            return math.inf
        worst = max(worst, float((mine.to(torch.float64) - to[n]).abs().nan_to_num(math.inf).max()))
    return worst


ZERO_BIAS = (
    "The biases start at zero, so their norm ||w|| is 0 and r = ||w|| / ||u|| would be 0 (or 0/0):"
    " take r = 1 when either norm is 0, so that a zero-initialised tensor moves by lr * u on the first step."
)


def _describe(key: str, name: str, got: Any, want: torch.Tensor) -> str:
    """Where a tensor is wrong: its path at the largest error, the two values told apart, the error."""
    if not isinstance(got, torch.Tensor):
        return f'{key}["{name}"] is missing'
    if got.shape != want.shape:
        return f'{key}["{name}"] has shape {tuple(got.shape)}, expected {tuple(want.shape)}'
    found = tensor_difference(want, got.to(torch.float64), TOLERANCE, f'{key}["{name}"]')
    return str(found) if found else f'{key}["{name}"] holds NaN or inf'


def _tensor_rule(facts: Facts, key: str, biases: bool, ok: str, hint: Callable[[Any], str]) -> Outcome:
    """Partial credit: the share of the tensors at ``result[key]`` (the biases alone with ``biases``) that are
    right; the first wrong one described, then ``hint``'s advice about its run."""
    right = total = 0
    where, first = "", None
    for g, i, case, r in _runs(facts):
        want, tree = case.expected[r][key], result(g, i, r)
        if not isinstance(tree, dict) and not where:
            where = f"{g.name}: {case_failure(g, i, r) or 'no result'}"
        got = tree.get(key) if isinstance(tree, dict) else None
        got = got if isinstance(got, dict) else {}
        for name in [n for n in want if n.endswith("bias") or not biases]:
            total += 1
            if _right(got.get(name), want[name]):
                right += 1
            elif not where:
                where = f"{g.name}, {case.label}: {_describe(key, name, got.get(name), want[name])}"
                first = (g, i, case, r)
    data: dict[str, Any] = {"tensors": total, "right": right}
    if not total:
        return Outcome(False, "no cases were run for this check", data, fraction=0.0)
    if right == total:
        return Outcome(True, ok, data, fraction=1.0)
    advice = hint(first) if first else ""
    message = f"{right} of {total} tensors right. {where}." + (f" {advice}" if advice else "")
    return Outcome(False, message, data, fraction=right / total)


FIRST_STEP = (
    "After one step each tensor must be w - lr * r * u with u = m_hat / (sqrt(v_hat) + eps) + weight_decay * w"
    " (bias-corrected moments, t = 1) and r = ||w|| / ||u|| for that tensor (1 if either norm is 0)."
)


def _first_step_hint(run: Any) -> str:
    g, i, case, r = run
    got = result(g, i, r).get("first")
    if not isinstance(got, dict):
        return FIRST_STEP
    want = case.expected[r]["first"]
    found = _diagnose(case, got, want, list(want))
    if found:
        return found
    weights = [n for n in want if not n.endswith("bias")]
    if all(_right(got.get(n), want[n]) for n in weights):
        return "The weights are right but the biases are not. " + ZERO_BIAS
    return FIRST_STEP


def first_step(facts: Facts) -> Outcome:
    ok = "every parameter tensor after the first step equals the trusted float64 LAMB"
    return _tensor_rule(facts, "first", False, ok, _first_step_hint)


def _bias_hint(run: Any) -> str:
    g, i, case, r = run
    got = result(g, i, r).get("first")
    if not isinstance(got, dict):
        return ZERO_BIAS
    names = [n for n in case.expected[r]["first"] if n.endswith("bias")]
    if all(isinstance(got.get(n), torch.Tensor) and not bool(got[n].any()) for n in names):
        return "Your biases are still all zero after the first step. " + ZERO_BIAS
    if any(isinstance(got.get(n), torch.Tensor) and not bool(torch.isfinite(got[n]).all()) for n in names):
        return "Your biases hold NaN or inf after the first step (0 / 0 in the trust ratio?). " + ZERO_BIAS
    found = _diagnose(case, got, case.expected[r]["first"], names)
    return found or "A zero tensor's step is lr * u with u = m_hat / (sqrt(v_hat) + eps) (its decay term is 0)."


def zero_biases(facts: Facts) -> Outcome:
    ok = "the zero-initialised biases moved on the first step, by exactly lr * u (trust ratio 1)"
    return _tensor_rule(facts, "first", True, ok, _bias_hint)


def parameters(facts: Facts) -> Outcome:
    def hint(run: Any) -> str:
        if not first_step(facts).passed:
            return "The first step was already wrong: fix that first (see its check)."
        return (
            "The first step is right, so look at what carries over: keep m and v per tensor across steps"
            " (self.state[p]), count t = 1, 2, ... per tensor for the bias corrections, and recompute the"
            " trust ratio from the current w and u at every step."
        )

    ok = f"every parameter tensor after {STEPS} steps equals the trusted float64 LAMB"
    return _tensor_rule(facts, "params", False, ok, hint)


def _series(curves: Any, batches: list[int]) -> list[dict[str, Any]]:
    series = []
    for name, label in (("lamb", "your LAMB"), ("adamw", "AdamW")):
        rows = curves.get(name) if isinstance(curves, dict) else None
        if not isinstance(rows, torch.Tensor) or rows.dim() != 2 or rows.shape[0] != len(batches):
            continue
        for size, row in zip(batches, rows[:, :200].tolist(), strict=True):
            points = [[step + 1, round(math.log10(v), 5)] for step, v in enumerate(row) if v > 0 and math.isfinite(v)]
            series.append({"name": f"{label}, batch {size}", "points": points})
    return series


def convergence(facts: Facts) -> Outcome:
    right = total = 0
    chart: dict[str, Any] | None = None
    problems: list[str] = []
    for g, i, case, r in _runs(facts):
        inputs, want = case.inputs[r], case.expected[r]["curves"]["lamb"]
        batches = [int(b) for b in inputs["batches"]]
        tree = result(g, i, r)
        curves = tree.get("curves") if isinstance(tree, dict) else None
        got = curves.get("lamb") if isinstance(curves, dict) else None
        chart = chart or {
            "title": "Training loss of your LAMB and of torch.optim.AdamW at three batch sizes",
            "x_label": "step",
            "y_label": "log10 of the training loss (mean squared error)",
            "series": _series(curves, batches),
        }
        for k, size in enumerate(batches):
            total += 1
            row = got[k] if isinstance(got, torch.Tensor) and got.dim() == 2 and got.shape[0] > k else None
            if row is not None and _right(row, want[k], CURVE_TOLERANCE):
                right += 1
            elif not problems:
                problems.append(_curve_problem(row, want[k], size, facts))
    data: dict[str, Any] = {"curves": total, "right": right}
    if chart and chart["series"]:
        data["chart"] = chart
    if not total:
        return Outcome(False, "no cases were run for this check", data, fraction=0.0)
    if right == total:
        return Outcome(
            True, "your LAMB's losses at every step equal the trusted LAMB's at the three batch sizes (chart below)",
            data, fraction=1.0,
        )  # fmt: skip
    return Outcome(False, f"{right} of {total} loss curves right. {problems[0]}", data, fraction=right / total)


def _curve_problem(row: Any, want: torch.Tensor, size: int, facts: Facts) -> str:
    if row is None:
        return "The convergence runs did not finish: fix the error the first-step check shows."
    if row.shape != want.shape:
        return f"At batch {size} the losses have shape {tuple(row.shape)}, expected {tuple(want.shape)}."
    if bool(torch.isnan(row).all()):
        return (
            f"At batch {size} step(closure) returned no loss: step must call the closure (under"
            " torch.enable_grad()) before updating, and return the loss it gave."
        )
    k = int((row - want).abs().nan_to_num(math.inf).argmax())
    where = f"At batch {size}, the loss at step {k + 1} {off_by(float(row[k]), float(want[k]))}."
    if first_step(facts).passed and parameters(facts).passed:
        return (
            f"{where} Your graded steps are right, so look at what only these runs use: they build"
            " Lamb(params, lr=..., weight_decay=...) with your defaults betas=(0.9, 0.999) and eps=1e-6, and call"
            " step(closure), which must call the closure before the update and return its loss."
        )
    return f"{where} These runs use the same step as the graded one: fix the parameters first (see those checks)."


RULES = {
    "first-step": first_step,
    "zero-biases": zero_biases,
    "parameters": parameters,
    "convergence": convergence,
}
