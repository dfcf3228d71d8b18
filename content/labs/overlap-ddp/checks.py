"""Trusted checks for overlap-ddp: per-submission inputs, the single-process reference, the rules.

Never mounted into the sandbox. Values are judged against ``driver.reference`` (single-process
training on the whole global batch), run here on this lab's own copy of the public driver.

The buckets are judged from the kernel's byte counts alone. On this torch's gloo, an all-reduce of
S bytes (S >= ~800) costs each rank 2(N-1)/N x S bytes of payload plus exactly 576 (N-1) bytes of
framing, whatever S is (measured on 2, 3 and 4 ranks for 100 to 100,000 float64 elements, issued
synchronously or not), so the framing counts the all-reduces. Only bytes between ranks count: the
driver's step barrier goes through the group's store.

A tiny all-reduce is framed less: gloo's ring splits k elements into 2N chunks of
chunk = ceil(k / 2N) elements and frames only the non-empty ones, so the ranks pay on average
576 (N-1) x f bytes, f = ceil(k / chunk) / 2N (1 for large k, 1/2N for one element, 1/N for two;
measured for 1, 2, 3, 5 and 9 elements on 2, 3 and 4 ranks: the mean over the ranks is exactly f).
The ranks share the few framed chunks unevenly: with the reference's buckets each rank's count is
within 0.1 of the buckets' sum on 3 and 4 ranks (1.25, 1.32 and 1.43 for 1 + 1/3 on 3) and exact
on 2, the mean within 0.001: well inside the tolerance of 0.5 / STEPS per step.

The model starts with a 1 -> 1 Linear (16 bytes of gradients) that every cap leaves alone in the
last bucket by both accepted rules, so a right bucketing of k buckets frames k - 1 + 1/N per step,
never a whole number: one flat buffer sent as k large slices (after backward, say) fails.

When each all-reduce was issued is known only from the driver's timeline, counted inside the rank,
where the student's code can rewrite it; the wire has no clock of the backward pass. So the
overlap check is feedback and carries no points.
"""

from __future__ import annotations

from typing import Any

import torch

from labs.authoring import Case, Facts, Outcome, load_public, load_trusted, result, training, wire

# 12,594 float64 parameters: 98.4 KiB of gradients per step. The first layer (1 -> 1, a learnable scale and shift of
# the single input feature) is 16 bytes of gradients, which every cap below leaves alone in the last bucket.
DIMS = [1, 1, 48, 64, 64, 64, 16]
BATCH = 24  # global batch: equal shards on 2, 3 and 4 ranks
STEPS = 3
HYPER = {"lr": 0.1, "momentum": 0.9, "weight_decay": 0.01}
# The bucket cap per world size (bytes): 4, 2 and 6 buckets by DDP's rule (see assign()), 6, 2 and 10 never over the
# cap; by both rules the last bucket is [0.bias, 0.weight] alone (of all caps over 391 bytes, only these three do so).
CAPS = {2: 25_856, 3: 100_736, 4: 768}
TOLERANCE = (1e-9, 1e-11)  # (rtol, atol): float64, sums in another order differ by ~1e-16
FRAMING = 576  # bytes per rank per all-reduce, times (N - 1), on top of the payload (see above)
DRIVER = load_public(__file__, "driver")
# The bucket rule and the framing a bucketing puts on the wire (bucketing.py).
bucketing = load_trusted(__file__, "bucketing")
framed, assign, candidates, _framing = bucketing.framed, bucketing.assign, bucketing.candidates, bucketing.framing


def ranks_identical(facts: Facts) -> Outcome:
    advice = "Every rank must apply the same averaged gradients, so that the replicas never drift apart."
    return training.ranks_identical(facts, steps=STEPS, first_check="gradients", advice=advice)


def cases(world_size: int, gen: torch.Generator) -> list[Case]:
    seed = int(torch.randint(0, 2**31 - 1, (1,), generator=gen))
    cap = CAPS.get(world_size, CAPS[2])
    inputs = {"seed": seed, "dims": DIMS, "batch": BATCH, "steps": STEPS, **HYPER, "bucket_cap_bytes": cap}
    expected = DRIVER.reference(inputs)
    label = f"{STEPS} SGD steps of an MLP {'-'.join(map(str, DIMS))}, bucket cap {cap} bytes"
    per_rank = [dict(inputs) for _ in range(world_size)]
    return [
        Case(check="gradients", fn="OverlappingDDP", driver="train", label=label, inputs=per_rank,
             **training.gradient_parts(world_size, expected, TOLERANCE))
    ]  # fmt: skip


UNFINISHED = training.UNFINISHED.replace("{} check", "gradients check")


def _same(a: Any, b: torch.Tensor) -> bool:
    return isinstance(a, torch.Tensor) and a.shape == b.shape and torch.allclose(a, b, rtol=1e-6, atol=1e-12)


def _rounded(a: Any, b: torch.Tensor, scale: float) -> bool:
    """``a`` is ``b`` to about float32's precision: every element within 1e-6 of ``scale``, the largest gradient
    (a float32 sum loses digits relative to its terms, which can be far larger than a small tensor's result)."""
    return isinstance(a, torch.Tensor) and a.shape == b.shape and bool((a - b).abs().max() <= 1e-6 * scale)


def _local_gradients(inputs: dict[str, Any], rank: int, world_size: int) -> dict[str, torch.Tensor]:
    """This rank's own shard gradients in the first step (what it has before any averaging)."""
    dims = list(inputs["dims"])
    model = DRIVER.build_model(int(inputs["seed"]), dims)
    x, y = DRIVER.make_batch(int(inputs["seed"]) + 1, dims, int(inputs["batch"]))
    xs, ys = DRIVER.shard(x, rank, world_size), DRIVER.shard(y, rank, world_size)
    torch.nn.functional.mse_loss(model(xs), ys).backward()
    return {name: p.grad for name, p in model.named_parameters() if p.grad is not None}


def _gradient_hint(g: Any, i: int, case: Case, rank: int) -> str:
    found = training.returned(g, i, case, rank, "grads")
    if found is None:
        return ""
    (grads, expected), n = found, g.world_size
    got = result(g, i, rank)
    wrong = [k for k in expected if not _same(grads.get(k), expected[k])]
    late = [s.get("late_writes", 0) for s in got.get("timeline", []) if isinstance(s, dict)]
    if any(late):
        return (
            " Some .grad still changed after finish() returned: an all-reduce was still running. In finish(),"
            " wait() on every bucket's work before you read its buffer or write .grad."
        )
    scale = max(float(t.abs().max()) for t in expected.values())
    if all(_rounded(grads.get(k), expected[k], scale) for k in expected):
        return (
            " Every gradient is right to about seven digits, not to float64's precision: the values were rounded"
            " on the way. Keep each bucket's flat buffer in the gradients' own dtype (float64) when you all-reduce it."
        )
    if wrong and all(_same(grads.get(k), n * expected[k]) for k in expected):
        return f" Every gradient is {n} times too large: all_reduce sums, so divide by dist.get_world_size()."
    local = _local_gradients(case.inputs[rank], rank, n)
    right_local = [k for k in wrong if _same(grads.get(k), local[k])]
    if right_local and len(right_local) == len(wrong):
        return (
            f" {', '.join(right_local)} still hold this rank's own shard gradient: nothing was averaged into them."
            " Every bucket's averaged values must be written back into each parameter's .grad, after its work"
            " has finished (wait() in finish())."
        )
    if 0 < len(wrong) < len(expected):
        return (
            f" {len(expected) - len(wrong)} of {len(expected)} parameters are right, but not {', '.join(wrong)}:"
            " wait for every bucket's all-reduce in finish(), then divide by the world size and copy it back."
        )
    return (
        " Each .grad must be the mean over the ranks of their shard gradients: all-reduce each bucket, wait() for"
        " its work in finish() before reading the buffer, then divide by N and copy it back into .grad."
    )


_parameter_hint = training.later_step_hint(
    f": every one of the {STEPS} steps gets new .grad tensors (the driver sets them to None), so find each"
    " bucket's gradients anew in every backward pass and reset what counts the ready gradients in finish()."
)


def gradients(facts: Facts) -> Outcome:
    return training.judge(facts, "gradients", _gradient_hint, success="single-process training")


def parameters(facts: Facts) -> Outcome:
    return training.judge(facts, "parameters", _parameter_hint, success="single-process training")


def _describe(bucket: list[str], nbytes: dict[str, int]) -> str:
    return f"[{', '.join(bucket)}] ({sum(nbytes[n] for n in bucket)} bytes)"


def _complete(order: list[str], buckets: list[list[str]]) -> list[int]:
    """After each ready gradient in ``order``, how many of ``buckets`` have all their gradients ready."""
    seen: set[str] = set()
    out = []
    for name in order:
        seen.add(name)
        out.append(sum(all(n in seen for n in b) for b in buckets))
    return out


def _timeline(got: Any, names: list[str]) -> list[dict[str, Any]] | str:
    """A rank's per-step timeline, checked for shape, or why it cannot be read."""
    steps = got.get("timeline") if isinstance(got, dict) else None
    if not isinstance(steps, list) or len(steps) != STEPS:
        return "the driver returned no timeline"
    for s, step in enumerate(steps):
        order, issued = step.get("order"), step.get("issued")
        if not isinstance(order, list) or sorted(order) != sorted(names):
            return (
                f"in step {s} the driver's hooks saw {len(order) if isinstance(order, list) else 0} of the"
                f" {len(names)} gradients become ready once each: accumulate every gradient into .grad in"
                " loss.backward() (do not replace the parameters, nor call backward yourself)"
            )
        if not isinstance(issued, torch.Tensor) or issued.numel() != len(names):
            return "the driver returned a malformed timeline"
    return steps


def _sizes(case: Case) -> dict[str, int]:
    return {n: t.numel() * t.element_size() for n, t in case.expected[0]["params"].items()}


ONE_PER_BUCKET = (
    "Issue exactly one all-reduce per bucket (not one per parameter, nor one for the whole model), each gradient"
    " in exactly one bucket, and no other collective"
)
ALL_SENT = (
    "Every gradient must be all-reduced, in float64, exactly once in every step, and finish() must wait() until"
    " each bucket's all-reduce has finished"
)
EARLY = (
    "A bucket is sent only once every gradient in it is ready: this one was smaller than the cap allows, or filled"
    " in another order than reverse model.parameters()"
)


def _rule(case: Case, options: list[list[list[str]]], nbytes: dict[str, int]) -> str:
    listed = ", ".join(_describe(b, nbytes) for b in options[0])
    return (
        f"With a cap of {case.inputs[0]['bucket_cap_bytes']} bytes (world size {len(case.inputs)}), walking"
        " model.parameters() in reverse and closing a bucket once it holds at least the cap, the"
        f" {len(options[0])} buckets are {listed}"
    )


def _num(x: float) -> str:
    """A count of all-reduces to two decimals, without trailing zeros: 4, 3.5, 1.33 (counts that differ by a
    reported amount differ by at least 0.5 / STEPS, so they never look the same)."""
    return f"{x:.2f}".rstrip("0").rstrip(".")


def _small(buckets: list[list[str]], nbytes: dict[str, int], world_size: int) -> str:
    """Which of ``buckets`` are framed as less than a large all-reduce, and how much, or ""."""
    said = []
    for j, b in enumerate(buckets):
        share = framed(sum(nbytes[n] for n in b) // 8, world_size)
        if share < 1:
            which = "the last" if j == len(buckets) - 1 else f"the {_nth(j + 1)}"
            said.append(
                f"{which}, [{', '.join(b)}], {sum(nbytes[n] for n in b)} bytes, is framed as {_num(share)} of a full"
                f" all-reduce on {world_size} ranks"
            )
    return f" ({'; '.join(said)})" if said else ""


def _guess(count: float, expected: list[float], inputs: dict[str, Any], nbytes: dict[str, int], n: int) -> str:
    """What gives the framing of ``count`` all-reduces per step, when exactly one usual mistake does (and no
    accepted bucketing, whose framing is ``expected``)."""
    found = [
        (w, k)
        for w, k in bucketing.mistakes(inputs, nbytes, n).items()
        if all(abs(k - e) * STEPS >= 0.5 for e in expected) and abs(count - k) * STEPS < 0.5
    ]
    return f" ({found[0][0]} gives {_num(found[0][1])})" if len(found) == 1 else ""


def buckets(facts: Facts) -> Outcome:
    """From the wire alone: every rank sent the float64 gradients once per step, with one all-reduce per bucket.

    The framing on the wire, in large all-reduces per step, must be what one accepted bucketing gives: the
    sum over its buckets of ``framed`` (the last bucket, 16 bytes, counts as 1/N of a large all-reduce).
    """
    problems: list[tuple[str, str]] = []
    rules: list[str] = []
    unfinished: list[str] = []
    data: dict[str, Any] = {}
    good = total = 0
    for g, i, case in training.cases_judging(facts, "gradients"):
        total += 1
        n = g.world_size
        if i not in g.wire or not training.finished(g, i):
            unfinished.append(str(n))
            continue
        nbytes = _sizes(case)
        size, frame = sum(nbytes.values()), FRAMING * (n - 1)
        payload = STEPS * 2 * (n - 1) * size / n
        sent = wire.sent(g.wire[i], n, peers_only=True)  # the group's store carries no all-reduce
        counts = [(s - payload) / frame / STEPS for s in sent]
        options = candidates(case.inputs[0])
        expected = [_framing(k, nbytes, n) for k in options]
        mean = sum(counts) / n  # the ranks share a tiny bucket's few framed chunks unevenly: judge the mean first
        j = next((j for j, e in enumerate(expected) if abs(mean - e) * STEPS < 0.5), 0)
        chosen, framing = options[j], expected[j]
        data[f"world_size_{n}"] = {
            "bucket_cap_bytes": int(case.inputs[0]["bucket_cap_bytes"]),
            "expected_buckets": [_describe(b, nbytes) for b in options[0]],
            "expected_framing_of_each_bucket": [round(_framing([b], nbytes, n), 4) for b in options[0]],
            "expected_all_reduces_per_step": [round(e, 4) for e in expected],
            "all_reduces_per_step_from_the_wire": [round(c, 3) for c in counts],
            "mean_over_the_ranks": round(mean, 3),
            "measured_bytes_per_rank": sent,
            "payload_bytes_per_rank": round(payload),
            "framing_bytes_per_all_reduce": frame,
        }
        off = [(r, c) for r, c in enumerate(counts) if abs(c - framing) * STEPS >= 0.5]
        if not off:
            good += 1
            continue
        r, c = off[0]
        if c < 0.5:
            what = (
                f"world size {n}: rank {r} sent only {sent[r]} bytes to the other ranks in {STEPS} steps, less than"
                f" one all-reduce of the {size}-byte float64 gradients per step needs"
                f" ({round(payload + STEPS * frame)})"
            )
            problems.append((what, ALL_SENT))
        else:
            plural = "" if _num(c) == "1" else "s"
            what = (
                f"world size {n}: rank {r} sent {sent[r]} bytes to the other ranks in {STEPS} steps: the {size}-byte"
                f" float64 gradients once per step plus the framing of {_num(c)} all-reduce{plural} per step; the"
                f" {len(chosen)} buckets give {_num(framing)}{_small(chosen, nbytes, n)}"
                f"{_guess(c, expected, case.inputs[0], nbytes, n)}"
            )
            problems.append((what, ONE_PER_BUCKET))
        rules.append(_rule(case, options, nbytes))
    if not total:
        return Outcome(False, "no measured training run", data, fraction=0.0)
    if unfinished:
        problems.append((UNFINISHED.format(training.sizes(unfinished), "its buckets cannot be judged"), ""))
    if problems:
        advice = [a for a in dict.fromkeys(a for _, a in problems) if a] + rules[:1]
        message = "; ".join(w for w, _ in problems[:3]) + "." + "".join(f" {a}." for a in advice)
        return Outcome(False, message[0].upper() + message[1:], data, fraction=good / total)
    right = "one all-reduce per bucket on every rank: the framing on the wire is what the expected buckets give"
    note = (
        "" if gradients(facts).passed else " (the buckets are right, although the values are not: see the other checks)"
    )
    return Outcome(True, f"{right} (wire bytes){note}", data, 1.0)


def _issue_points(r: int, steps: list[dict[str, Any]], chosen: list[list[str]]) -> tuple[str, str] | None:
    """Why rank ``r`` issued an all-reduce before its bucket was complete, or a wrong number per step."""
    for s, step in enumerate(steps):
        if int(step.get("finish", -1)) != len(chosen):
            what = (
                f"rank {r} issued {step.get('finish')} collectives in step {s} (by the process groups' sequence"
                f" numbers), not one per bucket ({len(chosen)})"
            )
            return what, ONE_PER_BUCKET
        order, issued = list(step["order"]), [int(c) for c in step["issued"]]
        for j, (done, count) in enumerate(zip(_complete(order, chosen), issued, strict=True)):
            if count > done:
                what = (
                    f"rank {r}, step {s}: {count} all-reduce{'s were' if count > 1 else ' was'} issued by the"
                    f" time the gradient of {order[j]} (the {_nth(j + 1)} to be ready) was, when only {done}"
                    f" bucket{'s were' if done != 1 else ' was'} complete"
                )
                return what, EARLY
    return None


def _nth(k: int) -> str:
    suffix = {1: "st", 2: "nd", 3: "rd"}.get(k % 10, "th") if k not in (11, 12, 13) else "th"
    return f"{k}{suffix}"


LATE = (
    "Issue each bucket's all-reduce with async_op=True from the hook of its last gradient, while backward goes"
    " on, and only wait() for the works in finish()."
)
FEEDBACK = " This check is feedback: it is measured inside your own process, so it cannot count (no points either way)."


def overlap(facts: Facts) -> Outcome:
    """Feedback, no points: the driver's timeline (counted in the rank) of when each all-reduce was issued."""
    problems: list[str] = []
    advice: list[str] = []
    rules: list[str] = []
    unfinished: list[str] = []
    data: dict[str, Any] = {"feedback": "measured inside the ranks: shown, never scored"}
    good = total = 0
    for g, i, case in training.cases_judging(facts, "gradients"):
        total += 1
        n = g.world_size
        if not training.finished(g, i):
            unfinished.append(str(n))
            continue
        nbytes = _sizes(case)
        options = candidates(case.inputs[0])
        why: str | None = None
        seen: dict[str, Any] = {}
        for r in range(n):
            steps = _timeline(result(g, i, r), list(nbytes))
            if isinstance(steps, str):
                why = why or f"rank {r}: {steps}"
                continue
            seen[str(r)] = {
                "issued_during_backward": [int(s["backward"]) for s in steps],
                "issued_by_finish": [int(s["finish"]) for s in steps],
                "backward_ms": [round(1e3 * float(s.get("backward_s", 0)), 3) for s in steps],
                "finish_ms": [round(1e3 * float(s.get("finish_s", 0)), 3) for s in steps],
            }
            if why:
                continue
            chosen = next((k for k in options if len(k) == int(steps[0].get("finish", -1))), options[0])
            early = _issue_points(r, steps, chosen)
            if early:
                why = early[0]
                advice.append(early[1] + ".")
                rules.append(_rule(case, options, nbytes) + ".")
                continue
            why = _late(r, steps, options)
            if why:
                advice.append(LATE)
        data[f"world_size_{n}"] = {"expected_buckets": len(options[0]), "ranks": seen}
        if why:
            problems.append(f"world size {n}, {why}")
        else:
            good += 1
    if not total:
        return Outcome(False, "no training run." + FEEDBACK, data, fraction=0.0)
    if unfinished:
        problems.append(UNFINISHED.format(training.sizes(unfinished), "when the all-reduces started is unknown"))
    if problems:
        tips = "".join(f" {a}" for a in [*dict.fromkeys(advice), *rules[:1]])
        message = "; ".join(problems[:2]) + "." + tips + FEEDBACK
        return Outcome(False, message[0].upper() + message[1:], data, fraction=good / total)
    right = "every bucket's all-reduce was issued during backward, as soon as its last gradient was ready"
    return Outcome(True, f"{right}, and no hook waited for it.{FEEDBACK}", data, 1.0)


def _late(r: int, steps: list[dict[str, Any]], options: list[list[list[str]]]) -> str | None:
    """The first bucket rank ``r`` did not issue by the time the next gradient was ready, or None."""
    for s, step in enumerate(steps):
        stuck = [int(k) for k in step.get("stuck", [])]
        if stuck:
            who = ", ".join(map(str, stuck))
            return (
                f"step {s}: rank 0 held its backward pass at its first gradient until the other ranks had finished"
                f" theirs, but rank{'s' if len(stuck) > 1 else ''} {who} never did: a hook waited for its"
                " all-reduce (a dist.all_reduce without async_op=True, or wait() right after it), which cannot"
                " finish without rank 0, so backward stalls at every bucket and nothing overlaps"
            )
        order, issued = list(step["order"]), [int(c) for c in step["issued"]]
        # A bucket may go out in its last gradient's hook or, at the latest, in the next gradient's.
        floor = [min(c) for c in zip(*([0, *_complete(order, k)[:-1]] for k in options), strict=True)]
        for j, (need, count) in enumerate(zip(floor, issued, strict=True)):
            if count < need:
                ready = order[j - 1]
                return (
                    f"rank {r}, step {s}: only {count} all-reduce{'s' if count != 1 else ''} had been issued by the"
                    f" time the gradient of {order[j]} was ready, although {need}"
                    f" bucket{'s were' if need != 1 else ' was'} complete once {ready} was"
                    f" ({int(step['backward'])} issued during the whole backward pass,"
                    f" {int(step['finish'])} by the end of finish())"
                )
        after = int(step["finish"]) - issued[-1]
        if after > 1:
            return (
                f"rank {r}, step {s}: {after} collectives were issued after the last gradient ({order[-1]}) was"
                f" ready, {int(step['finish'])} in the whole step: only the last bucket's all-reduce may wait"
                " that long"
            )
    return None


RULES = {
    "gradients": gradients,
    "parameters": parameters,
    "ranks-identical": ranks_identical,
    "buckets": buckets,
    "overlap": overlap,
}
