"""Trusted checks for pipeline-gpipe: per-submission inputs, the unsplit reference, the rules.

Never mounted into the sandbox. Each stage's parameters are drawn here from that rank's own
generator and given to that rank only, the batch to rank 0 only and the targets to the last rank
only. The reference is ``driver.reference`` (the whole model on one process, each micro-batch's
loss and one backward of their mean), run here on this lab's own copy of the public driver. Wire
bytes come from the kernel. The schedule (each stage's record of its forwards and backwards, kept
by the driver's stage) comes from inside the ranks, where the student's code can rewrite it: the
bubble check replays it with ideal times and shows the result, as feedback with no points. The
wall-clock timings come from inside the ranks too, and are shown, never judged.
"""

from __future__ import annotations

from typing import Any

import torch

from labs.authoring import (
    Case,
    Facts,
    Outcome,
    case_failure,
    compare,
    load_public,
    load_trusted,
    result,
    tallies,
    training,
)

# The measured run: 128 rows of 256 float64 features cross each stage boundary, 256 KiB each way,
# in M = 4 micro-batches of 64 KiB. Two linear layers per stage: 4 layers on 2 ranks (the
# exercise's model), 8 on 4.
WIDTH, BATCH, MEASURED_M = 256, 128, 4
# The timed runs: a small model (the sleep, not the arithmetic, is the compute) at the exercise's
# M = 1, 2, 4, 8; a stage takes FORWARD_S + BACKWARD_S for the whole batch, split over micro-batches.
TIMED_WIDTH, TIMED_BATCH, TIMED_M = 16, 64, [1, 2, 4, 8]
# Only on the exercise's 2 stages: every micro-batch is a message in a row from stage to stage, and on 4
# stages the timed runs would double the messages of a grading (what its time grows with on a busy machine).
TIMED_SIZES = {2}
FORWARD_S, BACKWARD_S = 0.003, 0.006
IN_FEATURES, OUT_FEATURES = 32, 16
TOLERANCE = (1e-9, 1e-11)  # (rtol, atol): float64; the micro-batches' gradients are summed in another order
ELEMENT = 8  # float64
# Each neighbour link carries the whole batch's activations (forward) or their gradients (backward)
# once: between LOW and HIGH times that, plus FRAMING bytes for gloo's headers. A link between
# stages that are not neighbours may carry at most STRAY bytes.
LOW, HIGH, FRAMING, STRAY = 0.95, 1.10, 16384, 4096
schedule = load_trusted(__file__, "schedule")  # the bubble's replay and what a GPipe record must look like


def dims(world_size: int, width: int) -> list[int]:
    """Two linear layers per stage, every hidden layer ``width`` wide."""
    layers = 2 * world_size
    return [IN_FEATURES, *([width] * (layers - 1)), OUT_FEATURES]


def stages(settings: dict[str, Any], world_size: int, gen: torch.Generator) -> list[dict[str, Any]]:
    """Every rank's inputs: its own stage's parameters, the batch on rank 0 and the targets on the last rank.

    Each from that rank's own generator (uniform weights and biases in +-1/sqrt(fan_in), as
    torch.nn.Linear draws them): no rank is given, or can draw, another stage's parameters or the
    data it does not hold, so the losses and gradients exist only once the stages have communicated.
    """
    driver = load_public(__file__, "driver")
    own = training.secret_generators(gen, world_size)
    dims_, f64 = list(settings["dims"]), torch.float64
    out = []
    for r in range(world_size):
        params: dict[str, torch.Tensor] = {}
        for name, shape in driver.modules(dims_)[driver.stage_slice(dims_, r, world_size)]:
            if shape is not None:
                fan_in, fan_out = shape
                bound = fan_in**-0.5
                params[f"{name}.weight"] = (torch.rand(fan_out, fan_in, generator=own[r], dtype=f64) * 2 - 1) * bound
                params[f"{name}.bias"] = (torch.rand(fan_out, generator=own[r], dtype=f64) * 2 - 1) * bound
        batch = int(settings["batch"])
        x = torch.randn(batch, dims_[0], generator=own[r], dtype=f64) if r == 0 else None
        y = torch.randn(batch, dims_[-1], generator=own[r], dtype=f64) if r == world_size - 1 else None
        out.append({**settings, "params": params, "x": x, "y": y})
    return out


def cases(world_size: int, gen: torch.Generator) -> list[Case]:
    driver = load_public(__file__, "driver")
    measured: dict[str, Any] = {"dims": dims(world_size, WIDTH), "batch": BATCH, "micro_batches": [MEASURED_M]}
    timed: dict[str, Any] = {"dims": dims(world_size, TIMED_WIDTH), "batch": TIMED_BATCH, "micro_batches": TIMED_M}
    per_row = {"forward_s_per_row": FORWARD_S / TIMED_BATCH, "backward_s_per_row": BACKWARD_S / TIMED_BATCH}
    timed |= {"timed": True, **per_row}
    runs = [(measured, f"{BATCH} x {WIDTH} activations in M = {MEASURED_M} micro-batches", True)]
    if world_size in TIMED_SIZES:
        runs.append((timed, f"timed runs, M = {', '.join(map(str, TIMED_M))}", False))
    out = []
    for settings, label, measure in runs:
        inputs = stages(settings, world_size, gen)
        ref = driver.reference(inputs)
        # Each stage's own parameters' gradients, per run; the losses on the last stage.
        expected = [{"grads": {key: {n: g[n] for n in i["params"]} for key, g in ref["grads"].items()}} for i in inputs]
        expected[-1]["losses"] = ref["losses"]
        layers = len(settings["dims"]) - 1
        out.append(
            Case(
                check="gradients",
                fn="gpipe_step",
                driver="step",
                label=f"{layers} layers on {world_size} stages, {label}",
                inputs=inputs,
                expected=expected,
                inplace=False,
                measure=measure,
                parts={"gradients": ["grads"], "losses": ["losses"], "bubble": ["events"]},
                tolerance={"grads": TOLERANCE, "losses": TOLERANCE},
            )
        )
    return out


def _unfinished(g: Any, so: str) -> str:
    why = training.UNFINISHED.format(g.name, so, "gradients")
    return why[0].upper() + why[1:]


def losses(facts: Facts) -> Outcome:
    tally = tallies.Tally(unit="run")
    for g, i, case in training.cases_judging(facts, "losses"):
        last = g.world_size - 1
        got = result(g, i, last)
        for m in case.inputs[last]["micro_batches"]:
            if not isinstance(got, dict):
                tally.add(_unfinished(g, "it returned no losses"))
                continue
            want, mine = case.expected[last]["losses"][run(m)], _at(got.get("losses"), run(m))
            if (found := compare(want, mine, {"": TOLERANCE})) is not None:
                tally.add(
                    f"{g.name}, rank {last} (the last stage), M = {m}: the losses {found}", _loss_hint(mine, want)
                )
            else:
                tally.add(None)
    success = f"the last stage's micro-batch losses equal the unsplit model's in all {tally.total} runs"
    return tally.outcome(success, score=True)


def _loss_hint(mine: Any, want: torch.Tensor) -> str:
    m = want.numel()
    if isinstance(mine, torch.Tensor) and mine.dim() == 1 and mine.numel() != m:
        return (
            f" Return one loss per micro-batch, {m} of them, in micro-batch order: cut the batch into"
            " num_micro_batches equal micro-batches (inputs.chunk(num_micro_batches)) and run each through the"
            " pipeline."
        )
    if isinstance(mine, torch.Tensor) and mine.shape == want.shape and torch.allclose(mine * m, want, rtol=1e-6):
        return (
            f" Each is {m} times too small: return loss_fn(output, target) itself; divide by M only what you"
            " backpropagate."
        )
    return " Return loss_fn(stage output, targets of that micro-batch) for each micro-batch, in order, as floats."


def _same(a: torch.Tensor | None, b: torch.Tensor | None) -> bool:
    return a is not None and b is not None and a.shape == b.shape and torch.allclose(a, b, rtol=1e-6, atol=1e-12)


def _one_micro_batch(per_rank: list[dict[str, Any]], m: int, j: int) -> dict[str, torch.Tensor]:
    """The unsplit model's gradients of micro-batch ``j``'s loss alone, divided by M."""
    driver = load_public(__file__, "driver")
    params = {k: v for i in per_rank for k, v in i["params"].items()}
    model = driver.assemble(list(per_rank[0]["dims"]), params)
    x, y = per_rank[0]["x"], per_rank[-1]["y"]
    (driver.loss_fn(model(x.chunk(m)[j]), y.chunk(m)[j]) / m).backward()
    return {name: p.grad for name, p in model.named_parameters()}


def _grads_at(g: Any, i: int, case: Case, rank: int, key: str) -> tuple[torch.Tensor | None, torch.Tensor | None]:
    """(what ``rank`` returned as run ``key``'s gradients, what it should have), each flattened."""
    got, want = result(g, i, rank), case.expected[rank]["grads"][key]
    return training.flat(_at(got.get("grads") if isinstance(got, dict) else None, key), list(want)), training.flat(
        want, list(want)
    )


def _gradient_hint(g: Any, i: int, case: Case, rank: int) -> str:
    n = g.world_size
    for m in case.inputs[rank]["micro_batches"]:
        mine, expected = _grads_at(g, i, case, rank, run(m))
        if _same(mine, expected):
            continue
        where = f" (world size {n}, rank {rank}, M = {m})"
        if mine is None or not torch.isfinite(mine).all():
            return (
                f" A parameter has no float64 gradient{where}: every stage must run the backward pass of every"
                " micro-batch, so that autograd leaves each parameter's gradient in its .grad."
            )
        if m > 1 and _same(mine, m * expected):  # type: ignore[operator]
            return (
                f" Every gradient is M = {m} times too large{where}: the step's loss is the mean of the M"
                " micro-batch losses, so backpropagate loss_fn(output, target) / M for each micro-batch."
            )
        for j, which in ((m - 1, "last"), (0, "first")):
            one = training.flat(_one_micro_batch(case.inputs, m, j), list(case.expected[rank]["grads"][run(m)]))
            if m > 1 and one is not None and (_same(mine, one) or _same(mine, m * one)):
                return (
                    f" The gradients are those of the {which} micro-batch only{where}: do not clear .grad between"
                    " micro-batches; autograd adds each micro-batch's backward into .grad."
                )
        if rank < n - 1 and _same(*_grads_at(g, i, case, n - 1, run(m))):
            return (
                f" The last stage's gradients are right but an earlier stage's are not{where}: each stage must"
                " send back the gradient of its own input (x.grad, with x.requires_grad_() set on the activation"
                " it received), computed from that micro-batch's activation, kept until its backward."
            )
        break
    kept = (
        " Receive each micro-batch into a fresh tensor and keep it until that micro-batch's backward: autograd"
        " saved it for the backward, and receiving the next micro-batch into the same tensor overwrites it."
        if rank > 0
        else ""
    )
    return (
        " Each .grad must be the gradient of (1/M) x sum over micro-batches of loss_fn(output_m, target_m):"
        f" all forwards, then each micro-batch's backward with the gradient the next stage sent back.{kept}"
    )


def gradients(facts: Facts) -> Outcome:
    return training.judge(facts, "gradients", _gradient_hint, success="the unsplit model's gradients")


# bubble: the schedule each stage recorded, replayed with ideal times; the wall clock shown beside it.
# Feedback only (no points in lab.yaml): the record is kept inside the ranks, where the student's code
# can rewrite it, and no count the grader takes outside the ranks tells the order of the messages.

FEEDBACK = "(Feedback, no points: the schedule is recorded inside your processes.)"


def _schedule_problem(g: Any, m: int, wrong: list[tuple[int, str]], ideal: float | None, theory: float) -> str | None:
    """What keeps run M = ``m``'s schedule from GPipe's: ``wrong`` (rank, why), its bubble replayed and in theory."""
    if not wrong and ideal is not None and abs(ideal - theory) < 1e-9:
        return None
    what = f"{g.name}, M = {m}: the stages' orders cannot run together (each waits for another)"
    if wrong:
        what = f"{g.name}, rank {wrong[0][0]}, M = {m}: {wrong[0][1]}"
    if ideal is not None and not (wrong and wrong[0][1] == schedule.LIBRARY):
        what += f". Replayed with ideal times, this schedule's bubble is {ideal:.3g}, not (N-1)/(M+N-1) = {theory:.3g}"
    return what


def bubble(facts: Facts) -> Outcome:
    tally = tallies.Tally(unit="run")
    series: dict[int, dict[str, list[list[float]]]] = {}
    data: dict[str, Any] = {}
    for g, i, case in training.cases_judging(facts, "bubble"):
        n, inputs, trees = g.world_size, case.inputs[0], [result(g, i, r) for r in range(g.world_size)]
        batch = int(inputs["batch"])
        for m in (int(v) for v in inputs["micro_batches"]):
            if not all(isinstance(t, dict) for t in trees):
                tally.add(_unfinished(g, "its schedule is unknown"))
                continue
            stages = [schedule.parse(_at(t.get("events"), run(m))) for t in trees]
            if any(s is None for s in stages):
                tally.add(f"{g.name}, M = {m}: a stage's record of its forwards and backwards is unreadable")
                continue
            ideal, theory = schedule.replay(stages, batch), schedule.theory(n, m)  # type: ignore[arg-type]
            mine = None if ideal is None else round(ideal, 4)
            row = {"M": m, "theory": round(theory, 4), "your_schedule": mine}
            lines = series.setdefault(n, {"theory": [[v, round(schedule.theory(n, v), 4)] for v in TIMED_M]})
            if mine is not None and [m, mine] not in lines.setdefault("schedule", []):
                lines["schedule"] = sorted([*lines["schedule"], [m, mine]])
            if inputs.get("timed"):
                measured = schedule.measured([_at(t.get("timing"), run(m)) for t in trees])
                row["measured_wall_clock"] = None if measured is None else round(measured, 4)
                if measured is not None:
                    lines.setdefault("measured", []).append([m, round(measured, 4)])
            data.setdefault(f"world_size_{n}", []).append(row)
            wrong = [(r, schedule.LIBRARY) for r, t in enumerate(trees) if t.get("uses_pipelining") is not False]
            wrong += [(r, why) for r, s in enumerate(stages) if (why := schedule.shape_problem(s, m, batch))]  # type: ignore[arg-type]
            tally.add(_schedule_problem(g, m, wrong, ideal, theory))
    if series:
        data["chart"] = schedule.chart(series)
        if table := schedule.measured_table(series):
            data["table"] = table
    success = (
        f"every stage ran GPipe's schedule in all {tally.total} runs: its bubble is (N-1)/(M+N-1); the chart shows"
        " your schedule replayed against that theory (the wall clock, noisy on a busy machine, is in its own table). "
    )
    return tally.outcome(success + FEEDBACK, data, advice=FEEDBACK, score=True)


def run(m: int) -> str:
    """A run's key in the results: ``"M=4"`` (as the driver writes it)."""
    return f"M={m}"


def _at(runs: Any, key: str) -> Any:
    return runs.get(key) if isinstance(runs, dict) else None


def wire_verdict(n: int, activation_bytes: int, sent: list[list[int]]) -> list[str]:
    """What is wrong with one measured run's traffic (empty: right); ``sent[r][p]``: bytes rank r sent to rank p."""
    problems: list[str] = []
    high, low = HIGH * activation_bytes + FRAMING, LOW * activation_bytes
    for r in range(n):
        for p in range(n):
            if p == r:
                continue
            s = sent[r][p]
            if abs(p - r) == 1:
                what = "activations" if p == r + 1 else "gradients of its input activations"
                if s > high:
                    problems.append(
                        f"rank {r} sent {s:,} bytes to rank {p}, more than the {what} of the whole batch"
                        f" ({activation_bytes:,} bytes): send each micro-batch's {what.split(' of ')[0]} once, and"
                        " nothing else (no parameters, no copies)"
                    )
                elif s < low:
                    problems.append(
                        f"rank {r} sent only {s:,} bytes to rank {p}; the {what} of the whole batch are"
                        f" {activation_bytes:,} bytes: send every micro-batch's {what} to rank {p}"
                    )
            elif s > STRAY:
                problems.append(
                    f"rank {r} sent {s:,} bytes to rank {p}, which is not its neighbour: a stage sends activations"
                    " only to the next stage (rank + 1) and gradients only to the previous one (rank - 1), with"
                    " dist.send/dist.recv, not collectives such as broadcast"
                )
    return problems


def communication(facts: Facts) -> Outcome:
    tally = tallies.Tally(unit="measured run", empty="no measured run")
    data: dict[str, Any] = {}
    for g, i, case in training.cases_judging(facts, "gradients"):
        n, wire = g.world_size, g.wire.get(i)
        if not case.measure:
            continue
        if wire is None or not training.finished(g, i):
            tally.add(_unfinished(g, "its traffic says nothing"))
            continue
        activation_bytes = int(case.inputs[0]["batch"]) * int(case.inputs[0]["dims"][1]) * ELEMENT
        sent = [[int(wire["sent"].get(str(r), {}).get(str(p), 0)) for p in range(n)] for r in range(n)]
        data[f"world_size_{n}"] = {"activation_bytes": activation_bytes, "sent": sent}
        if found := wire_verdict(n, activation_bytes, sent):
            tally.add(f"{g.name}: {found[0]}{tallies.more(len(found) - 1, 'link')}")
        elif not training.values_right(g, i, ("gradients",)) or case_failure(g, i, n - 1, part="losses"):
            tally.add(
                f"{g.name}: the bytes look right, but the losses or gradients are wrong (see those checks), and bytes"
                " count only for a run whose values are right"
            )
        else:
            tally.add(None)
    success = "each stage sent its activations to the next stage and their gradients to the previous one, nothing else"
    return tally.outcome(success, data, shown=2)


RULES = {"losses": losses, "gradients": gradients, "bubble": bubble, "communication": communication}
