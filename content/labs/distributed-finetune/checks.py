"""Trusted checks for distributed-finetune: the launches, the single-process reference, the rules.

Never mounted into the sandbox. Per grading: a fresh ``SEED`` (the fine-tuning corpus and the
held-out set, the sampler's shuffle) and a drawn (``CHECKPOINT_EVERY``, kill step); one
uninterrupted launch per world size but ``RESUME_AT``, where a launch is killed by the driver
``OVERLAP + 1`` optimizer steps after a checkpoint that lies inside an epoch, then relaunched on the
same CHECKPOINT_DIR. The killed launch's log (the steps before the kill) is that world size's
trajectory; the steps it logged after its newest checkpoint are the ones the relaunch must log again,
equal: that is how a resume is judged without a third launch.

What earns points is read after the ranks exited: the JSON lines each launch left at METRICS_PATH
(compared with ``reference.train``, one process emulating FSDP2's bf16 mixed precision, computed
here), the relaunch's against the killed launch's and the reference, and what each rank printed
(captured by the zygote, outside the ranks). What the driver counted inside the ranks is only quoted.
"""

from __future__ import annotations

import re
from concurrent.futures import Future, ThreadPoolExecutor
from functools import cache
from typing import Any

import torch

from labs.authoring import Case, Facts, GroupRun, Outcome, Phase, load_public, load_trusted, tallies

launches = load_trusted(__file__, "launches")  # reading what a launch left: its log, how it ended

SIZE = 32  # sequences in the corpus: whole micro-batches and steps at 1 and 2 ranks
PPL_RTOL = 1e-4
SAME_RTOL = 1e-5  # a resumed launch against the same world size's uninterrupted one (bitwise equal when right)
NO_CHECKPOINT = 1000  # CHECKPOINT_EVERY of the uninterrupted launches: past the last step, so they save none
RESUME_AT = 2  # the world size of the killed launch and its relaunch
OVERLAP = 2  # steps the killed launch logs after its newest checkpoint: the relaunch logs them again
EVERY = (3, 4, 5)  # the CHECKPOINT_EVERY drawn from (at least OVERLAP + 1: no checkpoint between it and the kill)
LOG_LINE = re.compile(r"^step \d+", re.MULTILINE)


# One thread: the two references of a grading run one after the other, on the core the 1-rank launch leaves free.
_REFERENCES = ThreadPoolExecutor(max_workers=1, thread_name_prefix="finetune-reference")


class _Want(dict[str, Any]):
    """What a launch is judged against: the reference run (losses, lrs, perplexity; cut to the steps
    before the kill for a killed launch) and what the rules need to read its files. The reference is
    computed in the background while the ranks run, and waited for on first use (after every launch:
    the rules run once the groups have ended). The grader holds torch at one thread, as the ranks run."""

    def __init__(self, run: Future[dict[str, Any]], steps: int | None = None, **known: Any) -> None:
        super().__init__(known)
        self._run, self._steps = run, steps

    def __missing__(self, key: str) -> Any:
        run = self._run.result()
        if self._steps is not None:  # a killed launch: the steps before the kill, and no perplexity
            run = {"losses": run["losses"][: self._steps], "lrs": run["lrs"][: self._steps], "perplexity": None}
        if key not in run:
            raise KeyError(key)
        self.update({k: v for k, v in run.items() if k not in self})
        return dict.__getitem__(self, key)


def _draw(gen: torch.Generator, low: int, high: int) -> int:
    return int(torch.randint(low, high + 1, (1,), generator=gen))


def _env(folder: str, seed: int, every: int, metrics: str = launches.METRICS) -> dict[str, Any]:
    return {
        "SEED": seed,
        "CORPUS_SIZE": SIZE,
        "CHECKPOINT_EVERY": every,
        "CHECKPOINT_DIR": f"{{shared}}/{folder}/checkpoints",
        "METRICS_PATH": f"{{shared}}/{folder}/{metrics}",
    }


def _steps(task: Any, world_size: int) -> tuple[int, int]:
    """(optimizer steps per epoch, in all) at ``world_size``."""
    per_epoch = SIZE // world_size // task.LOCAL_BATCH // task.ACCUMULATION
    return per_epoch, per_epoch * task.EPOCHS


def kill_plans(per_epoch: int, total: int) -> list[tuple[int, int, int]]:
    """(CHECKPOINT_EVERY, newest checkpoint, kill step) with the checkpoint inside an epoch and the
    steps logged before the kill reaching the second epoch (the sampler's shuffle shows there)."""
    return [
        (every, c, c + OVERLAP + 1)
        for every in EVERY
        for c in range(every, total, every)
        if c % per_epoch and c + OVERLAP + 1 <= total and c + OVERLAP > per_epoch
    ]


def phases(world_sizes: list[int], gen: torch.Generator) -> list[Phase]:
    """One uninterrupted launch per world size but ``RESUME_AT``, where a launch is killed and relaunched."""
    task, reference = load_public(__file__, "task"), load_trusted(__file__, "reference")
    seed = _draw(gen, 1, 2**30)
    n = RESUME_AT if RESUME_AT in world_sizes else max(world_sizes)
    out: list[Phase] = []
    for size in world_sizes:
        if size == n:
            continue
        later = _REFERENCES.submit(reference.train, task, seed, SIZE, size)
        want = _Want(later, folder=f"run-{size}", seed=seed, world_size=size)
        inputs = [{"env": _env(f"run-{size}", seed, NO_CHECKPOINT)} for _ in range(size)]
        label = f"an uninterrupted launch on {size} rank{'s' if size > 1 else ''}"
        out.append(Phase("launch", size, [_case("trajectory", label, inputs, want)], shares_dir=True))
    per_epoch, total = _steps(task, n)
    plans = kill_plans(per_epoch, total)
    every, newest, kill = plans[_draw(gen, 0, len(plans) - 1)]
    full = _REFERENCES.submit(reference.train, task, seed, SIZE, n)
    folder = f"resume-{n}"
    # The hook kills after optimizer step `kill`, before it is logged: the launch logs the steps before it.
    before = _Want(full, kill - 1, folder=folder, seed=seed, world_size=n, kill=kill, killed=True)
    first = [{"env": _env(folder, seed, every), "kill_at": kill} for _ in range(n)]
    label = f"a launch on {n} ranks killed after optimizer step {kill}"
    killed = Phase("killed launch", n, [_case("trajectory", label, first, before)], expect_crash=True, shares_dir=True)
    out.append(killed)
    want = _Want(full, folder=folder, seed=seed, world_size=n, newest=newest, kill=kill, total=total, every=every)
    again = [{"env": _env(folder, seed, every, launches.RELAUNCH)} for _ in range(n)]
    label = f"relaunched on {n} ranks after a kill at step {kill}"
    out.append(Phase("relaunch", n, [_case("resume", label, again, want)], shares_dir=True))
    return out


def _case(check: str, label: str, inputs: list[dict[str, Any]], want: dict[str, Any]) -> Case:
    """One run of the script on every rank; ``expected[0]`` holds what the rules need (never compared whole)."""
    return Case(check=check, fn="main", driver="run", label=label, inputs=inputs, expected=[want] * len(inputs))


def _runs(facts: Facts) -> list[tuple[GroupRun, dict[str, Any]]]:
    """The launches whose log is a trajectory: the uninterrupted ones and the killed one (up to its kill)."""
    return [(g, g.cases[0].expected[0]) for g in facts.groups if g.cases and g.cases[0].check == "trajectory"]


def _cut(run: dict[str, Any], want: dict[str, Any]) -> dict[str, Any]:
    """``run``'s steps as far as ``want`` has them (a killed launch logs only the steps before its kill)."""
    n = len(want["losses"])
    return {"losses": run["losses"][:n], "lrs": run["lrs"][:n]}


def _sizes(facts: Facts) -> str:
    """The world sizes of the uninterrupted launches, in words: "1 and 2 ranks"."""
    sizes = [str(want["world_size"]) for _, want in _runs(facts)]
    said = ", ".join(sizes[:-1]) + f" and {sizes[-1]}" if len(sizes) > 1 else "".join(sizes)
    return f"{said} rank{'s' if sizes != ['1'] else ''}"


def _where(want: dict[str, Any]) -> str:
    n = want["world_size"]
    killed = f", before the kill after step {want['kill']}" if want.get("killed") else ""
    return f"{n} rank{'s' if n > 1 else ''}{killed}"


@cache
def _variants(seed: int, n: int) -> dict[str, dict[str, Any]]:
    """The trajectories of known mistakes at ``n`` ranks (computed only for a launch that is wrong)."""
    task, reference = load_public(__file__, "task"), load_trusted(__file__, "reference")
    per_epoch, total = _steps(task, n)
    V = reference.Variant
    made = {
        "fixed_order": V(fixed_order=True),
        "last_micro": V(last_micro=True),
        "warmup_from_zero": V(warmup_from_zero=True),
        "cosine_micro": V(cosine_steps=total * task.ACCUMULATION),
        "cosine_epoch": V(cosine_steps=per_epoch),
    }
    if n > 1:
        made["unscaled"] = V(unscaled=True)
    return {name: reference.train(task, seed, SIZE, n, v) for name, v in made.items()}


ADVICE = {
    "fixed_order": (
        "Every epoch after the first trains on the batches of the first, in the same order: call"
        " sampler.set_epoch(epoch) at the start of every epoch, so that DistributedSampler shuffles anew."
    ),
    "last_micro": (
        "Each optimizer step used only the gradient of its last micro-batch: zero the gradients once per"
        " optimizer step (after optimizer.step()), not before every micro-batch's backward."
    ),
    "warmup_from_zero": (
        "The warmup starts one step late: optimizer step i (0-based) of the warmup uses"
        " peak x (i + 1) / WARMUP_STEPS, so the first step already has a learning rate."
    ),
    "cosine_micro": (
        "The cosine runs over the micro-batches, not the optimizer steps: its length is EPOCHS x"
        " (optimizer steps per epoch), each of ACCUMULATION micro-batches."
    ),
    "cosine_epoch": "The cosine decays over one epoch's steps: its length is every optimizer step of every epoch.",
    "unscaled": (
        "The peak learning rate was not scaled with the world size: the global batch is WORLD_SIZE x"
        " LOCAL_BATCH x ACCUMULATION sequences, so the peak is BASE_LR x WORLD_SIZE."
    ),
}
DATA_RIGHT = ("last_micro", "warmup_from_zero", "cosine_micro", "cosine_epoch", "unscaled")


def _known(records: list[dict[str, float]], want: dict[str, Any]) -> str | None:
    """The known mistake whose trajectory the launch's is, or None."""
    for name, run in _variants(want["seed"], want["world_size"]).items():
        if launches.matches(records, _cut(run, want)):
            return name
    return None


# --- the rules ---------------------------------------------------------------------------------------------


def trajectory(facts: Facts) -> Outcome:
    tally = tallies.Tally(unit="wrong run", empty="no launch was run")
    for g, want in _runs(facts):
        records, _, problem = launches.metrics(g, want["folder"])
        if short := not problem and launches.cut_short(records, want):
            tally.add(f"{_where(want)}: {short}", launches.FLUSH_ADVICE)
            continue
        wrong = problem or launches.wrong(records, want)
        advice = ADVICE.get(_known(records, want) or "", "") if wrong and not problem else ""
        tally.add(f"{_where(want)}: {wrong}" if wrong else None, advice)
    advice = (
        "The loss of a step is the mean over its whole global batch (every rank's micro-batches): all-reduce"
        " it before rank 0 logs it. Compare your run with the statement's recipe line by line."
    )
    success = f"the loss of every optimizer step equals the reference's, at {_sizes(facts)}"
    return tally.outcome(success, advice=advice if tally.problems and not tally.advice else "", score=True)


def sampler(facts: Facts) -> Outcome:
    tally = tallies.Tally(unit="wrong run", empty="no launch was run")
    for g, want in _runs(facts):
        records, _, problem = launches.metrics(g, want["folder"])
        if problem:
            tally.add(f"{_where(want)}: {problem}")
            continue
        if short := launches.cut_short(records, want):
            tally.add(f"{_where(want)}: {short}", launches.FLUSH_ADVICE)
            continue
        if launches.matches(records, want):
            tally.add(None)
            continue
        known = _known(records, want)
        if known in DATA_RIGHT:  # the steps trained on the right batches; another mistake changed the losses
            tally.add(None)
        elif known == "fixed_order":
            repeated = "the losses of epochs 2 and after are those of training on epoch 1's order again"
            tally.add(f"{_where(want)}: {repeated}", ADVICE[known])
        else:
            said = launches.wrong(records, want)
            tally.add(
                f"{_where(want)}: {said}; the batches each step trained on cannot be told apart from another"
                " mistake: check that each rank reads its DistributedSampler's share, LOCAL_BATCH sequences per"
                " micro-batch, with set_epoch(epoch) at every epoch"
            )
    success = f"every epoch trained on a new shuffle, split across the ranks, at {_sizes(facts)}"
    return tally.outcome(success, score=True)


def schedule(facts: Facts) -> Outcome:
    tally = tallies.Tally(unit="wrong run", empty="no launch was run")
    for g, want in _runs(facts):
        records, _, problem = launches.metrics(g, want["folder"])
        if short := not problem and launches.cut_short(records, want):
            tally.add(f"{_where(want)}: {short}", launches.FLUSH_ADVICE)
            continue
        wrong = problem or launches.wrong(records, want, "lr")
        advice = ""
        if wrong and not problem:
            for name, run in _variants(want["seed"], want["world_size"]).items():
                run = _cut(run, want)
                if name in ("fixed_order", "last_micro") or len(run["lrs"]) != len(records):
                    continue
                if all(launches.close(r["lr"], w, launches.LR_RTOL) for r, w in zip(records, run["lrs"], strict=True)):
                    advice = ADVICE[name]
                    break
        tally.add(f"{_where(want)}: {wrong}" if wrong else None, advice)
    success = f"the learning rate of every step follows warmup, cosine and linear scaling, at {_sizes(facts)}"
    return tally.outcome(success, score=True)


def _relaunches(facts: Facts) -> list[tuple[int, GroupRun, dict[str, Any]]]:
    return [
        (k, g, g.cases[0].expected[0]) for k, g in enumerate(facts.groups) if g.cases and g.cases[0].check == "resume"
    ]


def perplexity(facts: Facts) -> Outcome:
    tally = tallies.Tally(unit="wrong run", empty="no launch was run")
    seen: dict[int, float] = {}
    # Each world size's final perplexity: an uninterrupted launch's, or a relaunch's that resumed exactly
    # (one that did not loses `resume`; its end says nothing of the perplexity's computation).
    ends = [(g, want, launches.METRICS) for g, want in _runs(facts) if not want.get("killed")]
    ends += [(g, want, launches.RELAUNCH) for k, g, want in _relaunches(facts) if not _resume_wrong(facts, k, g, want)]
    for g, want, name in ends:
        _, got, problem = launches.metrics(g, want["folder"], name)
        if problem or got is None:
            tally.add(f"{_where(want)}: {problem or 'METRICS_PATH holds no perplexity record'}")
            continue
        seen[want["world_size"]] = got
        ok = launches.close(got, want["perplexity"], PPL_RTOL)
        tally.add(
            None if ok else f"{_where(want)}: the held-out perplexity is {got!r}, expected {want['perplexity']!r}"
        )
    spread = ""
    if len(seen) > 1:
        gap = max(seen.values()) / min(seen.values()) - 1
        spread = f" (they differ by {gap:.1%} across world sizes, as the reference's do)"
    sizes = sorted(seen)
    said = " and ".join(str(n) for n in sizes) + f" rank{'s' if sizes != [1] else ''}"
    success = f"the final held-out perplexity equals the reference's at {said}{spread}"
    advice = (
        "The perplexity is exp of the mean cross-entropy over every token of task.held_out(SEED), after the last step."
    )
    return tally.outcome(success, advice=advice if tally.problems else "", score=True)


def _followed(before: list[dict[str, float]], want: dict[str, Any]) -> dict[str, Any] | None:
    """The whole run whose first steps the killed launch's log is: the reference's, a known mistake's, or None.

    The relaunch's steps after the kill are held to it: the overlap alone could be copied from the killed
    launch's log, which lies in the same shared folder."""
    if launches.matches(before, _cut(want, {"losses": before})):
        return want
    return next(
        (
            run
            for run in _variants(want["seed"], want["world_size"]).values()
            if launches.matches(before, _cut(run, {"losses": before}))
        ),
        None,
    )


def _resume_wrong(facts: Facts, k: int, g: GroupRun, want: dict[str, Any]) -> str | None:
    """What the relaunch got wrong: it must log again, equal, the steps the killed launch logged after its
    newest checkpoint, then every step to the last (as the reference's where the killed launch's were)."""
    first = facts.groups[k - 1]
    if first.status is None or g.status is None:
        return "not run: an earlier launch ended the grading"
    if launches.ended(first):
        return f"the launch to be killed at step {want['kill']}: {launches.ended(first)}"
    before, _, problem = launches.metrics(first, want["folder"])
    if problem:
        return f"the launch before the kill: {problem}"
    records, _, problem = launches.metrics(g, want["folder"], launches.RELAUNCH)
    if problem:
        return f"the relaunch: {problem}"
    if not records or records[-1]["step"] != want["total"]:
        why = launches.ended(g)
        return "the relaunch did not log every step to the last" + (f": {why}" if why else "")
    first_step = records[0]["step"]
    if first_step == 1:
        return (
            "the relaunch started again at step 1: load the newest checkpoint in CHECKPOINT_DIR and continue after it"
        )
    if first_step != want["newest"] + 1:
        return (
            f"the relaunch's first step is {first_step}; the newest checkpoint holds {want['newest']} steps"
            f" (CHECKPOINT_EVERY = {want['every']}), so it should continue with step {want['newest'] + 1}"
        )
    by_step = {r["step"]: r for r in before}
    if any(s not in by_step for s in range(int(first_step), want["kill"])):
        logged = f"steps up to {before[-1]['step']}" if before else "no step"
        return (
            f"the launch before the kill logged {logged}, not up to {want['kill'] - 1}, so the relaunch cannot be"
            f" compared with it: {launches.FLUSH}"
        )
    followed = _followed(before, want)
    whom = "the launch before the kill"
    for r in records:
        b, redone = by_step.get(r["step"]), r["step"] in by_step
        if b is None:  # past the kill: as the uninterrupted run whose steps the killed launch's were
            if followed is None:
                return (
                    "the launch before the kill trained otherwise than the reference (see the trajectory check), so"
                    " the relaunch's steps after the kill have nothing to be compared with: put the trajectory right"
                    " first, and this check will judge the resume"
                )
            i = r["step"] - 1
            b, whom = {"loss": followed["losses"][i], "lr": followed["lrs"][i]}, "an uninterrupted run"
        if not launches.close(r["lr"], b["lr"], SAME_RTOL):
            return (
                f"after resuming, step {r['step']} used learning rate {r['lr']!r}, {whom} {b['lr']!r}:"
                " restore the scheduler's state (scheduler.state_dict()) with the checkpoint"
            )
        if launches.close(r["loss"], b["loss"], SAME_RTOL if redone else launches.LOSS_RTOL):
            continue
        if r["step"] == first_step:
            return (
                f"the first step after resuming (step {r['step']}) has loss {r['loss']!r}, {whom}"
                f" {b['loss']!r}: it trained other weights or other batches. Restore the model's shards, and"
                " continue the epoch where the checkpoint left it: set_epoch(epoch) and skip the micro-batches"
                " already done"
            )
        if redone:
            return (
                f"after resuming, step {r['step']} has loss {r['loss']!r}, {whom} {b['loss']!r}, while"
                f" step {first_step} agreed: the optimizer's state (AdamW's moments and step count) was not restored"
            )
        return (
            f"after resuming, step {r['step']} has loss {r['loss']!r}, an uninterrupted run {b['loss']!r}, while the"
            f" steps the killed launch had done agreed: the relaunch trains the steps after them otherwise"
        )
    return None


def resume(facts: Facts) -> Outcome:
    tally = tallies.Tally(unit="wrong relaunch", empty="no relaunch was run")
    for k, g, want in _relaunches(facts):
        wrong = _resume_wrong(facts, k, g, want)
        tally.add(f"{g.world_size} ranks, killed after step {want['kill']}: {wrong}" if wrong else None)
    success = "the relaunch continued after the newest checkpoint and logged the same steps as the launch it replaced"
    return tally.outcome(success, score=True)


def logging(facts: Facts) -> Outcome:
    tally = tallies.Tally(unit="wrong run", empty="no launch finished")
    for g in facts.groups:
        if g.status != "ok" or not g.cases:
            continue
        lines = [len(LOG_LINE.findall(str(run.info.get("output", "")))) for run in g.ranks]
        where = f"{g.phase} on {g.world_size} rank{'s' if g.world_size > 1 else ''}"
        if not lines[0]:
            tally.add(f"{where}: rank 0 printed no line starting 'step <n>'")
        elif any(lines[1:]):
            others = [r for r, count in enumerate(lines) if r and count]
            tally.add(
                f"{where}: rank{'s' if len(others) > 1 else ''} {', '.join(map(str, others))} printed log lines too"
            )
        else:
            tally.add(None)
    advice = "Log from rank 0 only: guard every print with `if rank == 0`."
    success = f"only rank 0 logged, in all {tally.total} launches"
    return tally.outcome(success, advice=advice if tally.problems else "", score=True)


RULES = {
    "trajectory": trajectory,
    "sampler": sampler,
    "schedule": schedule,
    "perplexity": perplexity,
    "resume": resume,
    "logging": logging,
}
