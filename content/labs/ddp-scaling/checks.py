"""Trusted checks for ddp-scaling: one job on 1, 2 and 4 ranks, the single-process reference, the model clock.

Never mounted into the sandbox. ``phases`` draws the job once per submission (the model's seed, the global
batch of every step, the model clock) and runs it at each world size, each rank given only its own shard.
The parameters are judged against ``driver.reference``, single-process training on the whole batch (the
same at every world size). The throughputs and efficiencies are judged against the model clock applied to
the all-reduces the kernel counted on the ranks' connections: nothing a rank says about its own traffic
counts.

Counting the all-reduces. On this torch's gloo, an all-reduce of k float64 elements costs each rank
2(N-1)/N x 8k bytes of payload plus 576 (N-1) bytes of framing, for every k whose 2N ring chunks are all
non-empty (measured on 2 and 4 ranks: one flat buffer of the 4,520 gradients, one all-reduce per
parameter, three slices of the flat buffer: 1.000, 6.000 and 3.000 all-reduces per step, the ranks'
mean exact; a slice of a size 2N does not divide is framed up to 0.04 unevenly between the ranks). Every
parameter tensor of the model has a multiple of 8 elements, so however the gradients are grouped into
whole tensors, (bytes per step - one all-reduce of the gradients' payload) / (576 (N-1)) is the number of
all-reduces per step. A 1-element all-reduce (a loss, say) is framed 1/2N of a full one and shows as a
fraction.
"""

from __future__ import annotations

from typing import Any

import torch

from labs.authoring import (
    Case,
    Facts,
    Outcome,
    Phase,
    case_failure,
    load_public,
    load_trusted,
    off_by,
    result,
    training,
    wire,
)

model_clock = load_trusted(__file__, "clock")  # the model clock: drawn per submission, a step's time by part

DIMS = [256, 16, 16, 8]  # 4,520 float64 parameters in 6 tensors (each a multiple of 8 elements): 36,160 bytes
# The global batch of every step: 192, 96 or 48 examples a rank. Each example is 2,112 bytes (256 + 8 float64), so
# a rank's shard of a step (101 KB on 4 ranks) outweighs one all-reduce per parameter (65 KB a step on 4 ranks):
# a rank that sends as many bytes as its examples moved the data (``training.moved_the_data``).
BATCH = 192
STEPS = 3
LR, WEIGHT_DECAY = 0.1, 0.01
TOLERANCE = (1e-9, 1e-11)  # (rtol, atol) on the parameters: float64, sums in another order differ by ~1e-16
FIGURES = 1e-9  # relative tolerance on a throughput or an efficiency: float64 arithmetic in another order
FRAMING = 576  # bytes per rank per all-reduce, times (N - 1), on top of the payload (see above)
WHOLE = 0.1  # how far the ranks' mean count of all-reduces per step may be from a whole number
EACH = 0.25  # how far one rank's count may be from it (a slice that 2N does not divide is framed unevenly)
VOID = training.moved_the_data


def gradient_bytes(case: Case) -> int:
    return sum(t.numel() * t.element_size() for t in case.expected[0]["params"].values())


def phases(world_sizes: list[int], gen: torch.Generator) -> list[Phase]:
    """One job (model, global batch, clock) drawn once, run at every world size; each rank given its own shard."""
    driver = load_public(__file__, "driver")
    shared, data = training.secret_generators(gen, 2)
    seed = int(torch.randint(0, 2**31 - 1, (1,), generator=shared))
    clock = model_clock.draw(shared)
    xs = torch.randn(STEPS, BATCH, DIMS[0], generator=data, dtype=torch.float64)
    ys = torch.randn(STEPS, BATCH, DIMS[-1], generator=data, dtype=torch.float64)
    settings = {"seed": seed, "dims": DIMS, "steps": STEPS, "lr": LR, "weight_decay": WEIGHT_DECAY}
    whole = {**settings, "x": list(xs), "y": list(ys)}
    expected = driver.reference([whole])  # the same whole batch, whatever the world size
    out = []
    for n in world_sizes:
        per = BATCH // n
        inputs = [
            {
                **settings,
                "batch": BATCH,
                "clock": clock,
                # clone(): a view would carry the whole batch's storage to every rank
                "x": [x[r * per : (r + 1) * per].clone() for x in xs],
                "y": [y[r * per : (r + 1) * per].clone() for y in ys],
            }
            for r in range(n)
        ]
        label = f"{STEPS} SGD steps of an MLP {'-'.join(map(str, DIMS))} on a global batch of {BATCH}, then the clock"
        case = Case(
            check="training", fn="sync_gradients", driver="train", label=label, inputs=inputs,
            expected=[expected for _ in range(n)], measure=True,
            parts={"training": ["params"], "throughput": ["throughput", "throughput_1"], "efficiency": ["efficiency"]},
            tolerance={"params": TOLERANCE},
        )  # fmt: skip
        out.append(Phase(None, n, [case]))
    return out


# ---- training ------------------------------------------------------------------------------------------------


def _close(a: Any, b: torch.Tensor) -> bool:
    return isinstance(a, torch.Tensor) and a.shape == b.shape and torch.allclose(a, b, rtol=1e-6, atol=1e-12)


def _training_hint(g: Any, i: int, case: Case, rank: int) -> str:
    got = result(g, i, rank)
    grads = got.get("grads") if isinstance(got, dict) else None
    want = case.expected[rank]["grads"]
    if not isinstance(grads, dict):
        return ""
    n = g.world_size
    wrong = [k for k in want if not _close(grads.get(k), want[k])]
    if not wrong:
        return (
            "The first step's gradients were right, so a later step went wrong: every call must average the"
            " gradients that loss.backward() just produced."
        )
    if all(_close(grads.get(k), n * want[k]) for k in want):
        return (
            f"After the first sync_gradients every gradient is {n} times the whole batch's: dist.all_reduce sums,"
            " so divide by dist.get_world_size()."
        )
    driver = load_public(__file__, "driver")
    inputs = case.inputs[rank]
    model = driver.build_model(int(inputs["seed"]), list(inputs["dims"]))
    driver.loss_fn(model, inputs["x"][0], inputs["y"][0]).backward()
    local = {k: p.grad for k, p in model.named_parameters()}
    if all(_close(grads.get(k), local[k]) for k in wrong):
        return (
            f"After the first sync_gradients, {', '.join(wrong)} still hold this rank's own shard gradients: average"
            " every parameter's gradient into its .grad (or copy the reduced flat buffer back into each .grad)."
        )
    return (
        f"After the first sync_gradients, {', '.join(wrong)} differ from the whole batch's gradients: each .grad must"
        " be the sum of the ranks' gradients divided by the world size."
    )


def training_rule(facts: Facts) -> Outcome:
    return training.judge(facts, "training", _training_hint, success="single-process training", void=VOID)


# ---- the model clock on the wire -------------------------------------------------------------------------------


def _calls(g: Any, i: int, case: Case) -> tuple[int | None, str]:
    """(all-reduces per step the kernel counted, "") or (None, why they cannot be counted) for group ``g``."""
    n = g.world_size
    if n == 1:
        return 0, ""
    counts = g.wire.get(i)
    if counts is None:
        return None, "the training did not finish, so its bytes were not counted"
    nbytes = gradient_bytes(case)
    payload = 2 * (n - 1) / n * nbytes
    per_step = [s / STEPS for s in wire.sent(counts, n)]
    each = [(s - payload) / (FRAMING * (n - 1)) for s in per_step]
    mean = sum(each) / n
    calls = round(mean)
    if calls >= 1 and abs(mean - calls) <= WHOLE and all(abs(c - calls) <= EACH for c in each):
        return calls, ""
    sent = f"the ranks sent {round(sum(per_step) / n):,} bytes per step on average"
    one = f"one all-reduce of the {nbytes:,}-byte gradients sends {round(payload):,} + {FRAMING * (n - 1):,} of framing"
    if mean < 0.5:
        return None, (
            f"{sent}, less than one all-reduce of every gradient ({one}): every gradient must be all-reduced, in"
            " float64, once per step"
        )
    return None, (
        f"{sent}: one payload of the gradients and the framing of {mean:.2f} all-reduces, not a whole number"
        f" of all-reduces of the gradients ({one}, and each further all-reduce another {FRAMING * (n - 1):,}),"
        " so the clock cannot price it. Send each gradient exactly once per step"
        " with dist.all_reduce, in float64, and nothing else (no losses, parameters or extra collectives)"
    )


def _priced(g: Any, i: int, case: Case) -> tuple[int | None, str]:
    """The all-reduces per step to price group ``g`` with, or None and why it cannot be priced."""
    if not training.finished(g, i):
        return None, "training did not finish on every rank (see the training check)"
    voided = VOID(g, i)
    if voided:
        return None, voided
    if any(case_failure(g, i, r, part="training") for r in range(g.world_size)):
        return None, (
            "the training is wrong (see the training check), and the clock prices only the all-reduces of training"
            " that is right"
        )
    return _calls(g, i, case)


def _model(case: Case, n: int, calls: int) -> dict[str, float]:
    inputs = case.inputs[0]
    return model_clock.step_seconds(inputs["clock"], n, int(inputs["batch"]), calls, gradient_bytes(case))


def _same(got: float, want: float) -> bool:
    return abs(got - want) <= FIGURES * abs(want)


def _mistake(got: float, case: Case, n: int, calls: int) -> str:
    """The mistakes that explain a wrong throughput at ``n`` ranks (``calls`` all-reduces per step), in words, or ""
    (every one that fits: where two give the same figure, naming one would guess)."""
    inputs = case.inputs[0]
    clock, batch, nbytes = inputs["clock"], int(inputs["batch"]), gradient_bytes(case)
    p = model_clock.step_seconds(clock, n, batch, calls, nbytes)
    t = p["step"]
    # These two price the latency of another whole number of all-reduces: said as themselves, not as a count.
    no_latency, alpha_once = batch / (t - p["latency"]), batch / (t - p["latency"] + calls * clock["alpha_s"])
    named = [
        ((batch / n) / t, "that is one rank's samples per second: the throughput counts every rank's examples, B / t"),
        (t, "that is the step time in seconds: the throughput is the global batch over it, B / t"),
        (
            no_latency,
            "it leaves out the latency: "
            + (f"each of the {calls} all-reduces per step" if calls > 1 else "an all-reduce")
            + " pays 2(N-1) alpha, one alpha for each of the ring's 2(N-1) messages",
        ),
        (
            alpha_once,
            "it charges alpha once per all-reduce: a ring all-reduce sends 2(N-1) messages in turn (N-1 to"
            " reduce-scatter, N-1 to all-gather), each paying alpha",
        ),
        (
            batch / (t - p["bandwidth"] + nbytes / clock["beta_Bps"]),
            "it sends S bytes over each link (S / beta): a ring all-reduce sends 2(N-1)/N x S from every rank"
            " (the bus bandwidth factor)",
        ),
        (
            batch / (t - p["bandwidth"] + 2 * nbytes / clock["beta_Bps"]),
            "it sends 2 S bytes over each link: a ring all-reduce sends 2(N-1)/N x S from every rank",
        ),
        (
            batch / (t - p["update"] + p["update"] / n),
            "it divides the optimizer step by N: every rank takes the whole step on the whole model",
        ),
        (
            batch / (t - p["compute"] + batch * clock["sample_s"]),
            f"it charges every rank the whole batch's compute: each rank computes only its B/N = {batch // n} examples",
        ),
        (batch / (t - p["latency"] - p["bandwidth"]), "it leaves out the all-reduce's cost altogether"),
    ]
    fits = [why for value, why in named if _same(got, value) and not _same(value, batch / t)]
    if n > 1 and got > 0 and not (_same(got, no_latency) or _same(got, alpha_once)):
        # The number of all-reduces the student's figure prices, everything else right.
        priced = (batch / got - p["compute"] - p["update"] - p["bandwidth"]) / (2 * (n - 1) * clock["alpha_s"])
        k = round(priced)
        if k != calls and k >= 0 and abs(priced - k) < 1e-6 * max(1, k):
            made = "one all-reduce per parameter tensor, say" if calls == len(case.expected[0]["params"]) else ""
            fits.append(
                f"it prices {k} all-reduce{'s' if k != 1 else ''} per step, but your ranks made {calls}"
                + (f" ({made})" if made else "")
                + ", counted on the wire: each all-reduce pays the latency 2(N-1) alpha"
            )
    if len(fits) > 1:
        return f"either {fits[0]}; or {'; or '.join(fits[1:])} (these give the same figure here)"
    return fits[0] if fits else ""


def _figure(got: Any) -> float | None:
    return float(got) if isinstance(got, int | float) else None


def _throughput_group(g: Any, i: int, case: Case) -> tuple[str | None, dict[str, Any]]:
    """Why group ``g``'s throughputs are wrong (None if right), and its figures for the data and the chart."""
    n, inputs = g.world_size, case.inputs[0]
    batch, nbytes, clock = int(inputs["batch"]), gradient_bytes(case), inputs["clock"]
    one = _model(case, 1, 0)
    shown: dict[str, Any] = {"model_throughput_1": batch / one["step"]}
    calls, why = _priced(g, i, case)
    mine = result(g, i, 0) or {}
    shown["your_throughput"] = _figure(mine.get("throughput"))
    shown["your_efficiency"] = _figure(mine.get("efficiency"))
    if calls is None:
        return why, shown
    parts = _model(case, n, calls)
    shown.update(
        allreduces_per_step=calls,
        model_step_ms=round(parts["step"] * 1e3, 6),
        model_throughput=batch / parts["step"],
        ideal_throughput=n * batch / one["step"],
        model_efficiency=one["step"] / (n * parts["step"]),
    )
    if n > 1:
        counts = g.wire.get(i) or {"sent": {}}
        shown["bytes_per_rank_per_step"] = [round(s / STEPS) for s in wire.sent(counts, n)]
    for r in range(n):
        got = result(g, i, r) or {}
        for key, at, want_parts in (("throughput", n, parts), ("throughput_1", 1, one)):
            value, want = _figure(got.get(key)), batch / want_parts["step"]
            if value is not None and _same(value, want):
                continue
            call = f"throughput(model, clock, {at}, {batch})"
            if value is None:
                return f"rank {r}'s {call} returned no number", shown
            k = calls if at == n else 0
            text = (
                f"rank {r}'s {call} {off_by(value, want)}: the model clock for the {calls} all-reduce"
                f"{'s' if calls != 1 else ''} of the {nbytes:,}-byte gradients per step counted on the wire gives"
                if at > 1
                else f"rank {r}'s {call} {off_by(value, want)}: on 1 rank nothing is communicated, and"
            )
            text += f" {model_clock.breakdown(want_parts, at, k, nbytes, clock, batch)}"
            if at == 1 and n > 1 and _same(value, batch / parts["step"]):
                return text + (
                    f". That is the figure for {n} ranks: use the world_size argument, not dist.get_world_size()"
                ), shown
            mistake = _mistake(value, case, at, k)
            return text + (f". Your figure matches a mistake: {mistake}" if mistake else ""), shown
    return None, shown


def _groups(facts: Facts) -> list[tuple[Any, int, Case]]:
    return sorted(training.cases_judging(facts, "throughput"), key=lambda c: c[0].world_size)


def _chart(rows: dict[int, dict[str, Any]], title: str, y_label: str, key: str, ideal: str, extra: list[Any]) -> Any:
    yours = [[n, row[f"your_{key}"]] for n, row in rows.items() if row.get(f"your_{key}") is not None]
    model = [[n, row[f"model_{key}"]] for n, row in rows.items() if f"model_{key}" in row]
    series = [
        {"name": "yours (rank 0's figure)", "points": yours, "group": "yours"},
        {"name": "the model clock, for the all-reduces on your wire", "points": model, "group": "model"},
        *extra,
        {
            "name": ideal,
            "style": "theory",
            "group": "ideal",
            "points": [[n, row["ideal_throughput"] if key == "throughput" else 1.0] for n, row in rows.items()],
        },
    ]
    series = [s for s in series if s["points"]]
    return {"title": title, "x_label": "ranks N", "y_label": y_label, "series": series} if series else None


def _table(facts: Facts) -> tuple[dict[int, dict[str, Any]], dict[int, str | None]]:
    rows: dict[int, dict[str, Any]] = {}
    problems: dict[int, str | None] = {}
    for g, i, case in _groups(facts):
        problems[g.world_size], shown = _throughput_group(g, i, case)
        shown.setdefault("ideal_throughput", g.world_size * shown["model_throughput_1"])
        rows[g.world_size] = shown
    return rows, problems


def _flat_line(facts: Facts, rows: dict[int, dict[str, Any]]) -> list[dict[str, Any]]:
    """The model for one flat all-reduce per step, drawn when the ranks made more than one."""
    if not any(row.get("allreduces_per_step", 1) > 1 for row in rows.values()):
        return []
    points = []
    for g, _, case in _groups(facts):
        batch = int(case.inputs[0]["batch"])
        points.append([g.world_size, batch / _model(case, g.world_size, min(1, g.world_size - 1))["step"]])
    return [
        {"name": "the model clock, one flat all-reduce per step", "style": "theory", "group": "flat", "points": points}
    ]


def _verdict(problems: dict[int, str | None], success: str, data: dict[str, Any]) -> Outcome:
    wrong = [f"world size {n}: {why}" for n, why in problems.items() if why]
    if not problems:
        return Outcome(False, "no world size was run", data, fraction=0.0)
    fraction = 1 - len(wrong) / len(problems)
    if wrong:
        more = f" ({len(wrong) - 1} more world size{'s' if len(wrong) > 2 else ''} wrong)" if len(wrong) > 1 else ""
        return Outcome(False, wrong[0] + more + ".", data, fraction=fraction)
    return Outcome(True, success, data, fraction=1.0)


def throughput(facts: Facts) -> Outcome:
    rows, problems = _table(facts)
    data: dict[str, Any] = {f"world_size_{n}": row for n, row in rows.items()}
    chart = _chart(
        rows, "Throughput against the number of ranks, on the model clock", "samples per second (all ranks)",
        "throughput", "ideal: N x T_1", _flat_line(facts, rows),
    )  # fmt: skip
    if chart:
        data["chart"] = chart
    calls = sorted({row["allreduces_per_step"] for n, row in rows.items() if n > 1 and "allreduces_per_step" in row})
    made = f"{' or '.join(map(str, calls))} all-reduce{'s' if calls != [1] else ''} per step" if calls else "nothing"
    success = (
        f"at every world size your throughputs equal the model clock's for what your ranks sent, counted on the"
        f" wire ({made}; nothing on 1 rank): the chart draws them against the ideal N x T_1"
    )
    return _verdict(problems, success, data)


def _efficiency_group(g: Any, i: int, case: Case, row: dict[str, Any], priced: str | None) -> str | None:
    n = g.world_size
    if "model_efficiency" not in row:
        return priced
    want = float(row["model_efficiency"])
    for r in range(n):
        got = result(g, i, r) or {}
        value, t1, tn = (_figure(got.get(k)) for k in ("efficiency", "throughput_1", "throughput"))
        if value is not None and _same(value, want):
            continue
        call = f"rank {r}'s scaling_efficiency"
        if value is None:
            return f"{call} returned no number"
        text = (
            f"{call} {off_by(value, want)}: E = T_N / (N T_1) = {row['model_throughput']:.6g} / ({n} x"
            f" {row['model_throughput_1']:.6g}) on the model clock"
        )
        if t1 and tn:
            if _same(value, n * t1 / tn) or _same(value, 1 / want):
                return text + ". Yours is N T_1 / T_N, the inverse: the efficiency is at most 1 and falls as N grows"
            if _same(value, tn / t1) or _same(value, n * want):
                return text + ". Yours is T_N / T_1, the speed-up: divide it by N for the efficiency"
            if _same(value, 100 * want):
                return text + ". Yours is a percentage: return the fraction"
            if _same(value, tn / (n * t1)):
                return text + (
                    ". Yours is T_N / (N T_1) of your own throughputs, which are wrong (see the throughput check)"
                )
        return text
    return None


def efficiency(facts: Facts) -> Outcome:
    rows, priced = _table(facts)
    problems = {g.world_size: _efficiency_group(g, i, case, rows[g.world_size], priced[g.world_size])
                for g, i, case in _groups(facts)}  # fmt: skip
    data = {
        f"world_size_{n}": {"model_efficiency": row.get("model_efficiency"), "your_efficiency": row["your_efficiency"]}
        for n, row in rows.items()
    }
    chart = _chart(rows, "Scaling efficiency against the number of ranks", "E_N = T_N / (N T_1)", "efficiency",
                   "ideal: 1", [])  # fmt: skip
    if chart:
        data["chart"] = chart
    shown = ", ".join(f"{row['model_efficiency']:.3f} on {n}" for n, row in rows.items() if "model_efficiency" in row)
    return _verdict(problems, f"your efficiencies equal the model clock's: {shown}", data)


RULES = {"training": training_rule, "throughput": throughput, "efficiency": efficiency}
