"""Trusted checks for comm-bandwidth: per-submission interconnects and measurements, the references, the rules.

Never mounted into the sandbox. Three calls per world size:

- ``benchmark``: the student's ``measure`` on the public virtual interconnect (real gloo all-reduces, a
  model's clock), a measured call whose bytes the kernel counts. The model is drawn here; the reference
  method and its mistakes are replayed on it here (``replay.py``), so each of the method's aspects
  (warm-up, barrier, statistic) is judged by which replayed method the student's times are: the times
  count only when the kernel counted at least the bytes of the timed all-reduces. The bytes alone judge
  the message sizes.
- ``convert`` and ``analyse``: the pure ``bandwidths`` and ``fit`` on measurements made up here, each
  rank its own set, from a model drawn here: the fit is held to that model, which never enters a rank
  except as the data to fit.
"""

from __future__ import annotations

import math
import random
from typing import Any

import torch

from labs.authoring import Case, Facts, Outcome, case_failure, load_public, load_trusted, result, tallies, wire

driver = load_public(__file__, "driver")
replay = load_trusted(__file__, "replay")
pictures = load_trusted(__file__, "pictures")  # the curve's table and chart

WARMUP, REPS = 3, 5  # each size: 3 untimed calls, then 5 timed ones
SIZE_COUNT, SIZE_STEP = 5, 4  # 5 sizes, each 4 times the last: from 1-1.75 KiB to 256-448 KiB
BASES = (1024, 1280, 1536, 1792)
MATCH = 1e-4  # a student's time equals a replayed one within this (float32 arithmetic included)
SYNTHETIC_N = (3, 4, 8, 16)  # the made-up measurements' world sizes beside 2 (whose factor 2(N-1)/N is 1)
LOW, HIGH, FRAMING = 0.85, 1.5, 2048  # message-sizes: bytes per rank within LOW-HIGH x theory + FRAMING per op
ASPECTS = ("warm-up", "synchronised", "robust-statistic")
ADVICE = {
    "warm-up": (
        "The first calls of each size pay for set-up (connections, buffers): make the warm-up calls first and time"
        " only the repetitions after them."
    ),
    "synchronised": (
        "After an all-reduce each rank has its own work before it can enter the next collective, and a collective"
        " starts when the last rank arrives: call ic.barrier() right before you read the clock for each timed call,"
        " so that the timer starts when every rank is ready."
    ),
    "robust-statistic": (
        "A hiccup (a call that takes 2-4 times as long) lands in some repetitions: the median of the repetitions"
        " ignores it, the mean does not."
    ),
}


def _rng(gen: torch.Generator) -> random.Random:
    return random.Random(int(torch.randint(0, 2**62, (1,), generator=gen)))


def _synthetic(rng: random.Random, world_size: int) -> list[int]:
    """The world sizes of the made-up measurements the ranks are given: 2 on one rank at world size 2."""
    others = rng.sample(SYNTHETIC_N, world_size)
    return [2, others[0]] if world_size == 2 else others


def _benchmark_case(rng: random.Random, n: int) -> Case:
    base = rng.choice(BASES)
    sizes = [base * SIZE_STEP**i for i in range(SIZE_COUNT)]
    link = replay.draw_link(rng, n, sizes, WARMUP, REPS)
    times = replay.replay(driver.Link, link, sizes, WARMUP, REPS, replay.REFERENCE)
    inputs = {"sizes": sizes, "warmup": WARMUP, "reps": REPS, "link": link}
    return Case(
        check="warm-up",
        fn="measure",
        label=f"measure on {n} ranks, {len(sizes)} sizes from {sizes[0]:,} to {sizes[-1]:,} bytes",
        inputs=[inputs] * n,
        expected=[{"times": torch.tensor(times, dtype=torch.float64)} for _ in range(n)],
        driver="benchmark",
        measure=True,
        tolerance={"times": (MATCH, 0.0)},
    )


def _convert_case(rng: random.Random, n: int) -> Case:
    inputs, expected = [], []
    for synthetic in _synthetic(rng, n):
        sizes = replay.CONVERT_SIZES
        times, _, _ = replay.measurements(rng, sizes, synthetic)
        algbw = [s / t for s, t in zip(sizes, times, strict=True)]
        busbw = [b * replay.factor(synthetic) for b in algbw]
        inputs.append({"sizes": sizes, "times": torch.tensor(times, dtype=torch.float64), "world_size": synthetic})
        expected.append(
            {"algbw": torch.tensor(algbw, dtype=torch.float64), "busbw": torch.tensor(busbw, dtype=torch.float64)}
        )
    return Case(
        check="bandwidth",
        fn="bandwidths",
        label=f"bandwidths on measurements made up for each rank (world size {n})",
        inputs=inputs,
        expected=expected,
        driver="convert",
        tolerance={"algbw": (1e-6, 0.0), "busbw": (1e-6, 0.0)},
    )


def _analyse_case(rng: random.Random, n: int) -> Case:
    sets = [replay.fit_dataset(rng, synthetic) for synthetic in _synthetic(rng, n)]
    return Case(
        check="fit",
        fn="fit",
        label=f"fit on measurements made up for each rank (world size {n})",
        inputs=[s["inputs"] for s in sets],
        expected=[s["truth"] for s in sets],
        driver="analyse",
        parts={"fit": ["alpha", "beta", "busbw"], "crossover": ["crossover"]},
        tolerance={k: (v, 0.0) for k, v in replay.FIT_TOLERANCE.items()},
    )


def cases(world_size: int, gen: torch.Generator) -> list[Case]:
    """The calls of one world size; ``gen`` is seeded per submission, so every model differs between gradings."""
    rng = _rng(gen)
    return [_benchmark_case(rng, world_size), _convert_case(rng, world_size), _analyse_case(rng, world_size)]


# ---- the benchmark ----------------------------------------------------------------------------------------------


def _benchmarks(facts: Facts) -> list[tuple[Any, int, Case]]:
    return [(g, i, c) for g in facts.groups for i, c in enumerate(g.cases) if c.driver == "benchmark"]


def _times(g: Any, i: int, r: int) -> list[float] | None:
    got = tallies.said(g, i, r, "times")
    return got.tolist() if isinstance(got, torch.Tensor) else None


def _theory_bytes(case: Case, n: int, calls: int) -> float:
    """What each rank sends in ``calls`` all-reduces of every size: 2(N-1)/N of each buffer, ring or not."""
    return calls * replay.factor(n) * sum(case.inputs[0]["sizes"])


_REPLAYS: dict[str, list[tuple[Any, list[float]]]] = {}  # by the case's inputs: the aspect rules share them


def _matches(case: Case, times: list[float]) -> list[Any]:
    """The replayed methods whose times equal ``times`` (every method replayed once per benchmark case)."""
    if replay.close(times, case.expected[0]["times"].tolist(), MATCH):
        return [replay.REFERENCE]  # the reference method's times: nothing to replay
    inputs = case.inputs[0]
    key = repr(inputs)  # the model and sizes themselves, not an object's id, which a later grading may reuse
    if key not in _REPLAYS:
        if len(_REPLAYS) > 8:
            _REPLAYS.clear()
        args = (driver.Link, inputs["link"], inputs["sizes"], inputs["warmup"], inputs["reps"])
        _REPLAYS[key] = [(m, replay.replay(*args, m)) for m in replay.METHODS]
    return [m for m, v in _REPLAYS[key] if replay.close(times, v, MATCH)]


def _gate(g: Any, i: int, case: Case) -> str | None:
    """Why the kernel's count says the timed all-reduces were not all made (None: at least their bytes were sent)."""
    counts = g.wire.get(i)
    if counts is None:
        return "the bytes on the wire were not measured"
    need = 0.5 * _theory_bytes(case, g.world_size, int(case.inputs[0]["reps"]))
    low = min(wire.sent(counts, g.world_size))
    if low < need:
        return (
            f"a rank sent only {low:,} bytes, less than half of what the timed all-reduces alone send"
            f" ({need * 2:,.0f}): times count only for all-reduces made through ic.all_reduce"
        )
    return None


def _where(g: Any, case: Case, times: list[float], want: list[float]) -> str:
    """The size where the times differ most, both times in microseconds."""
    sizes = case.inputs[0]["sizes"]
    worst = max(range(len(want)), key=lambda k: abs(times[k] - want[k]) / want[k])
    return f"at {sizes[worst]:,} bytes you report {times[worst] * 1e6:.6g} us where the reference method measures" + (
        f" {want[worst] * 1e6:.6g} us"
    )


def _unmatched(times: list[float], want: list[float]) -> str:
    """Possible causes when no replayed method gives the student's times."""
    ratios = [t / w for t, w in zip(times, want, strict=True) if w > 0]
    for scale, unit in ((1e3, "milliseconds"), (1e6, "microseconds")):
        if ratios and all(abs(r / scale - 1) < 0.01 for r in ratios):
            return f"your times are {scale:,.0f} times the reference's at every size: return seconds, not {unit}"
    return (
        "your times match none of the methods the grader replays (the reference, and it with warm-up calls timed,"
        " without a barrier before each timed call, a mean, or 2, 4 or 8 times the bytes). Read the clock with"
        " ic.now() (time.perf_counter measures this machine, not the interconnect), time each repetition on its own"
        " between a barrier and the end of its all-reduce, and report the median of each size's repetitions"
    )


def _aspect(aspect: str) -> Any:
    def rule(facts: Facts) -> Outcome:
        tally = tallies.Tally(unit="rank", empty="measure was not run")
        for g, i, case in _benchmarks(facts):
            want = case.expected[0]["times"].tolist()
            gate = _gate(g, i, case)
            for r in range(g.world_size):
                times, where = _times(g, i, r), f"world size {g.world_size}, rank {r}"
                if times is None or len(times) != len(want):
                    tally.add(f"{where}: {case_failure(g, i, r) or 'no times'}")
                    continue
                if gate:
                    tally.add(f"{where}: {gate}")
                    continue
                found = _matches(case, times)
                if not found:
                    tally.add(f"{where}: {_where(g, case, times, want)}; {_unmatched(times, want)}")
                elif not any(m.right(aspect) for m in found):
                    said = ", or that ".join(
                        dict.fromkeys(m.describe(aspect) for m in found)
                    )  # each way once, in order
                    tally.add(
                        f"{where}: your times are what a benchmark gives that {said} ({_where(g, case, times, want)})",
                        ADVICE[aspect],
                    )
                else:
                    tally.add(None)
        success = {
            "warm-up": "every rank's times leave out the warm-up calls of each size",
            "synchronised": "every rank synchronised before each timed call: no rank timed another's lateness",
            "robust-statistic": "every rank reported a statistic that the hiccups do not move (the median)",
        }[aspect]
        return tally.outcome(success)

    return rule


def message_sizes(facts: Facts) -> Outcome:
    """Each rank's bytes (kernel count) against W + R all-reduces of every size asked."""
    tally = tallies.Tally(unit="world size", empty="measure was not run")
    data: dict[str, Any] = {}
    for g, i, case in _benchmarks(facts):
        n, inputs = g.world_size, case.inputs[0]
        counts = g.wire.get(i)
        if counts is None:
            tally.add(f"world size {n}: {case_failure(g, i, 0) or 'the bytes on the wire were not measured'}")
            continue
        calls = int(inputs["warmup"]) + int(inputs["reps"])
        theory = _theory_bytes(case, n, calls)
        ops = len(inputs["sizes"]) * (calls + int(inputs["reps"]))
        sent = wire.sent(counts, n)
        data[f"world_size_{n}"] = {"theory_bytes_per_rank": round(theory), "measured_bytes_per_rank": sent}
        # From the timed calls alone (no warm-up: the warm-up check says so) to all of them, with gloo's framing.
        bad = wire.outside(sent, theory, (HIGH, LOW * int(inputs["reps"]) / calls, FRAMING * ops))
        if bad is None:
            tally.add(None)
            continue
        rank, count = bad
        ratio = count / theory
        cause = ""
        for scale in (2, 4, 8):
            if abs(ratio / scale - 1) < 0.25:
                cause = f": {replay.Method(scale=scale).describe('message-sizes')}"
        tally.add(
            f"world size {n}: rank {rank} sent {count:,} bytes, {ratio:.2f} times what {calls} all-reduces of each size"
            f" send ({theory:,.0f}){cause}",
            "An all-reduce of `size` bytes is a float32 tensor of size // 4 elements.",
        )
    return tally.outcome(
        "every rank sent what the warm-up calls and the repetitions of each size send (kernel count)", data
    )


# ---- bandwidths and the fit -------------------------------------------------------------------------------------


def _calls(facts: Facts, driver_name: str) -> list[tuple[Any, int, Case]]:
    return [(g, i, c) for g in facts.groups for i, c in enumerate(g.cases) if c.driver == driver_name]


def _ratio_advice(got: float, want: float, n: int, real: int) -> str:
    """What a wrong bus bandwidth's ratio to the right one says, where it says anything."""
    f = replay.factor(n)
    ratio = got / want if want else math.nan
    known = [
        (
            1 / f,
            "that is the algorithm bandwidth: the bus bandwidth multiplies it by 2(N-1)/N"
            + (
                f" (or it uses this run's world size, {real}, whose factor is 1: use the world_size argument, {n})"
                if real == 2
                else ""
            ),
        ),
        (replay.factor(real) / f, f"that uses this run's world size ({real}): use the world_size argument ({n})"),
        ((n - 1) / n / f, "that uses (N-1)/N; an all-reduce's bus bandwidth uses 2(N-1)/N"),
        (1 / f**2, "that divides by 2(N-1)/N; the bus bandwidth multiplies the algorithm bandwidth by it"),
    ]
    for value, text in known:
        if abs(value - 1) > 1e-9 and abs(ratio / value - 1) < 1e-3:
            return f": {text}"
    return ""


def bandwidth(facts: Facts) -> Outcome:
    tally = tallies.Tally(unit="rank", empty="bandwidths was not run")
    for g, i, case in _calls(facts, "convert"):
        for r in range(g.world_size):
            why = case_failure(g, i, r)
            if why is None:
                tally.add(None)
                continue
            n = int(case.inputs[r]["world_size"])
            where = f"world size {g.world_size}, rank {r} (measurements on {n} ranks)"
            got, want = tallies.said(g, i, r, "busbw"), case.expected[r]["busbw"]
            advice = ""
            if isinstance(got, torch.Tensor) and got.shape == want.shape and "busbw" in why:
                advice = _ratio_advice(float(got[-1]), float(want[-1]), n, g.world_size)
            algbw = tallies.said(g, i, r, "algbw")
            if isinstance(algbw, torch.Tensor) and algbw.shape == want.shape and "algbw" in why:
                ratio = float(algbw[-1] / case.expected[r]["algbw"][-1])
                for value, text in ((8.0, "bits per second"), (1e-9, "GB/s"), (2**-30, "GiB/s"), (1e-6, "MB/s")):
                    if abs(ratio / value - 1) < 1e-3:
                        advice = f": that is in {text}; return bytes per second"
            tally.add(f"{where}: {why}{advice}")
    return tally.outcome("algorithm and bus bandwidths right for every rank's measurements (2(N-1)/N for the bus)")


def _fit_advice(
    key: str, got: float, truth: dict[str, float], inputs: dict[str, Any], got_fit: dict[str, Any] | None = None
) -> str:
    """Which known mistake a fitted value's error shows, or ""."""
    n = int(inputs["world_size"])
    f = replay.factor(n)
    sizes, times = inputs["sizes"], inputs["times"].tolist()
    want = truth[key]
    ratio = got / want if want else math.nan
    if key == "alpha":
        plain, _ = replay.plain_fit(sizes, times)
        if math.isclose(got, plain, rel_tol=1e-3):
            return (
                ": that is what an unweighted least-squares line gives, where the largest messages (times 10^5 larger"
                " than the smallest) decide the intercept. Fit relative errors: divide each equation by its time"
            )
        loglog, _ = replay.loglog_fit(sizes, times)
        if math.isclose(got, loglog, rel_tol=1e-3):
            return ": a straight line in log-log space is not t = alpha + s / beta; fit that model to the times"
        return ": fit t = alpha + s / beta to relative errors (each equation divided by its time)"
    if f != 1 and abs(ratio / f - 1) < 0.03:
        return {
            "beta": ": that is the bus bandwidth; beta is the algorithm bandwidth the times show, s / (t - alpha)",
            "busbw": ": that multiplies by 2(N-1)/N twice",
            "crossover": ": that is alpha times the bus bandwidth; the crossover is alpha times beta",
        }[key]
    if f != 1 and abs(ratio * f - 1) < 0.03 and key == "busbw":
        return ": that is beta, the algorithm bandwidth; the bus bandwidth is beta x 2(N-1)/N"
    if key == "crossover":
        mine = float((got_fit or {}).get("alpha", math.nan)) * float((got_fit or {}).get("beta", math.nan))
        if math.isclose(got, mine, rel_tol=1e-6):
            return (
                ": that is your alpha x beta, the right formula; it is off because your alpha or beta is (see the fit)"
            )
        if any(math.isclose(got, s, rel_tol=1e-6) for s in sizes):
            return (
                ": that is one of the measured sizes; the crossover alpha x beta lies between them, where the"
                " latency alpha equals the transfer time s / beta"
            )
        return ": the crossover is alpha x beta, where the latency alpha equals the transfer time s / beta"
    return ""


def _fit_rule(check: str) -> Any:
    keys = ["alpha", "beta", "busbw"] if check == "fit" else ["crossover"]

    def rule(facts: Facts) -> Outcome:
        tally = tallies.Tally(unit="rank", empty="fit was not run")
        for g, i, case in _calls(facts, "analyse"):
            for r in range(g.world_size):
                why = case_failure(g, i, r, part=check)
                if why is None:
                    tally.add(None)
                    continue
                inputs, truth = case.inputs[r], case.expected[r]
                where = f"world size {g.world_size}, rank {r} (measurements on {inputs['world_size']} ranks)"
                got = result(g, i, r)
                wrong = next((k for k in keys if k in why), None)
                advice = ""
                if isinstance(got, dict) and wrong is not None and isinstance(got.get(wrong), float):
                    advice = _fit_advice(wrong, got[wrong], truth, inputs, got)
                tally.add(f"{where}: {why}{advice}")
        tolerances = ", ".join(f"{k} within {replay.FIT_TOLERANCE[k]:.0%}" for k in keys)
        return tally.outcome(f"every rank's fit recovers the model its measurements came from ({tolerances})")

    return rule


# ---- the curve: feedback ----------------------------------------------------------------------------------------


def curve(facts: Facts) -> Outcome:
    """The largest world size's rank 0: its bus bandwidth against the interconnect's, as a table and a log-log chart."""
    runs = [(g, i, c) for g, i, c in _benchmarks(facts) if _times(g, i, 0) is not None]
    if not runs:
        return Outcome(False, "measure returned no times, so there is no curve to draw", {}, fraction=0.0)
    g, i, case = max(runs, key=lambda run: run[0].world_size)
    sizes, times = case.inputs[0]["sizes"], _times(g, i, 0) or []
    want = case.expected[0]["times"].tolist()
    data = pictures.curve(g.world_size, case.inputs[0]["link"], sizes, times)
    if replay.close(times, want, MATCH):
        return Outcome(True, f"your bus bandwidth lies on the interconnect's curve ({len(sizes)} sizes)", data)
    k = max(range(len(want)), key=lambda j: abs(times[j] / want[j] - 1))
    return Outcome(
        False,
        f"your time is {times[k] / want[k]:.3g} times the interconnect's at {sizes[k]:,} bytes, so your bus bandwidth"
        " is off its curve there"
        " (the table and chart below; the checks above say why)",
        data,
    )


warm_up = _aspect("warm-up")
synchronised = _aspect("synchronised")
robust_statistic = _aspect("robust-statistic")
fit = _fit_rule("fit")
crossover = _fit_rule("crossover")

RULES = {
    "message-sizes": message_sizes,
    "warm-up": warm_up,
    "synchronised": synchronised,
    "robust-statistic": robust_statistic,
    "bandwidth": bandwidth,
    "fit": fit,
    "crossover": crossover,
    "curve": curve,
}
