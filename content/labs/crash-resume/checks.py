"""Trusted checks for crash-resume: the crashes the grader chooses, the uninterrupted reference, the rules.

Never mounted into the sandbox. Per world size: a phase in which one rank is killed right
after a chosen optimizer step, then the same script relaunched on the same checkpoint folder.
Once more, at one world size: rank 0 killed half-way through writing a checkpoint, then a
relaunch. The first phase also runs the script once with some of torchrun's variables unset.
The reference is ``task.reference`` (one process, whole batch, no interruption), run here.
"""

from __future__ import annotations

from typing import Any

import torch

from labs import trees
from labs.judge import Case, Facts, GroupRun, Outcome, Phase, result
from labs.public import load_public

TORCHRUN = ("RANK", "WORLD_SIZE", "LOCAL_RANK", "MASTER_ADDR", "MASTER_PORT")
NODES = {2: 2, 3: 3, 4: 2}  # nodes the ranks of each world size are spread over
TOLERANCE = (1e-9, 1e-11)  # float64; DDP sums the ranks' gradients in another order than one process
EXIT_MISSING = 2


def _draw(gen: torch.Generator, low: int, high: int) -> int:
    """An integer in [low, high], from the grade's generator."""
    return int(torch.randint(low, high + 1, (1,), generator=gen))


def _env(n: int, rank: int, folder: str, seed: int, total: int, every: int) -> dict[str, Any]:
    per = n // NODES.get(n, 1)
    return {
        "LOCAL_RANK": rank % per,
        "LOCAL_WORLD_SIZE": per,
        "GROUP_RANK": rank // per,
        "GROUP_WORLD_SIZE": n // per,
        "SEED": seed,
        "TOTAL_STEPS": total,
        "CHECKPOINT_EVERY": every,
        "CHECKPOINT_DIR": f"{{shared}}/{folder}/checkpoints",
        "FINAL_MODEL_PATH": f"{{shared}}/{folder}/final.pt",
    }


def phases(world_sizes: list[int], gen: torch.Generator) -> list[Phase]:
    task = load_public(__file__, "task")
    seed = int(torch.randint(0, 2**31 - 1, (1,), generator=gen))
    every = _draw(gen, 2, 3)
    total = every * 4 + _draw(gen, 0, every - 1)  # 8 to 14 steps, 4 checkpoints
    params = task.reference(seed, total)
    out: list[Phase] = []
    unset = [TORCHRUN[i] for i in torch.randperm(len(TORCHRUN), generator=gen)[: _draw(gen, 1, 2)].tolist()]
    for n in world_sizes:
        # Killed after a step that is not a checkpoint's: nothing is being saved then, so the
        # latest complete checkpoint is the one of step (kill // every) * every, whatever the timing.
        kill = _draw(gen, every + 1, total - 1)
        while kill % every == 0:
            kill = _draw(gen, every + 1, total - 1)
        victim = _draw(gen, 0, n - 1)
        folder = f"ws{n}-step"
        env = [_env(n, r, folder, seed, total, every) for r in range(n)]
        crash = [{"env": env[r], "kill_rank": victim, "kill_after_step": kill} for r in range(n)]
        cases = [_case("crash", f"rank {victim} killed right after optimizer step {kill}", crash, kill=kill)]
        if n == world_sizes[0]:
            missing = [{"env": env[r], "unset": unset} for r in range(n)]
            cases.insert(0, _case("environment", f"the script started without {', '.join(unset)}", missing))
        out.append(Phase(f"kill after step {kill}", n, cases, expect_crash=True))
        resume = (kill // every) * every
        relaunch = [{"env": env[r], "read_final": True} for r in range(n)]
        label = f"relaunched after rank {victim} was killed after step {kill} (every {every} steps, {total} steps)"
        out.append(Phase("relaunch", n, [_case("resumes", label, relaunch, resume, total, params, kill=kill)]))
    n = world_sizes[_draw(gen, 0, len(world_sizes) - 1)]
    saving = _draw(gen, 2, 3) * every  # a previous complete checkpoint exists, and steps remain
    folder = f"ws{n}-save"
    env = [_env(n, r, folder, seed, total, every) for r in range(n)]
    crash = [{"env": env[r], "kill_rank": 0, "kill_in_save_after_step": saving} for r in range(n)]
    label = f"rank 0 killed half-way through writing the checkpoint of step {saving}"
    out.append(Phase(f"kill inside the save of step {saving}", n, [_case("crash", label, crash)], expect_crash=True))
    relaunch = [{"env": env[r], "read_final": True} for r in range(n)]
    label = f"relaunched after rank 0 died half-way through saving the checkpoint of step {saving}"
    case = _case("half-written", label, relaunch, saving - every, total, params, kill=saving)
    out.append(Phase("relaunch after the half-written save", n, [case]))
    return out


def _case(
    check: str,
    label: str,
    inputs: list[dict[str, Any]],
    resume: int | None = None,
    total: int | None = None,
    params: dict[str, torch.Tensor] | None = None,
    kill: int | None = None,
) -> Case:
    """One run of the script on every rank. ``expected`` holds what the rules need, never compared as a whole."""
    expected = [
        {"resume": resume, "total": total, "kill": kill, "unset": i.get("unset"), "params": params if r == 0 else None}
        for r, i in enumerate(inputs)
    ]
    return Case(check=check, fn="main", driver="run", label=label, inputs=inputs, expected=expected)


def _runs(facts: Facts, check: str) -> list[tuple[GroupRun, int, Case]]:
    return [(g, i, c) for g in facts.groups for i, c in enumerate(g.cases) if c.check == check]


def _no_result(g: GroupRun, i: int, r: int) -> str:
    """Why rank r of group g has no result for case i."""
    if g.status is None:
        return "not run: an earlier phase ended the grading"
    run = g.ranks[r]
    errors = [e for e in run.errors if e.get("call") == i or e.get("phase") == "import"]
    if errors:
        return f"{errors[0].get('error')}: {errors[0].get('message')}"
    state = run.info.get("state", "no report")
    end = {"deadlock": ": the ranks hung (deadlock)", "time_limit": ": the time limit ran out"}.get(g.status or "", "")
    return f"no result: the run ended with this rank {state}{end}"


def _last_line(text: str) -> str:
    lines = [line.strip() for line in str(text).splitlines() if line.strip()]
    return lines[-1][:300] if lines else "(nothing on stderr)"


def _crash_note(facts: Facts, g: GroupRun) -> str:
    """If the crash before this relaunch did not happen, say so."""
    index = facts.groups.index(g) - 1
    before = facts.groups[index] if index >= 0 else None
    if before is None or not before.expect_crash:
        return ""
    for i, case in enumerate(before.cases):
        if case.check != "crash":
            continue
        victim = int(case.inputs[0]["kill_rank"])
        got = result(before, i, victim)
        if isinstance(got, dict):
            return (
                f" (the crash never happened: in the previous phase rank {victim}'s script ended with status"
                f" {got.get('exit')} after {got.get('optimizer_steps')} optimizer steps, before the grader could"
                " kill it)"
            )
    return ""


def _resume_problem(got: Any, expected: dict[str, Any]) -> str | None:
    """What is wrong with one rank's relaunch, or None."""
    if got.get("exit") != 0:
        return f"the relaunched script exited with status {got.get('exit')}: {_last_line(got.get('stderr', ''))}"
    resume, total = int(expected["resume"]), int(expected["total"])
    steps, batches = int(got.get("optimizer_steps", -1)), list(got.get("batches", []))
    if steps == total - resume and (not batches or batches[0] == resume):
        return None
    first = f", starting with the batch of step {batches[0]}" if batches else ""
    said = (
        f"the relaunched script took {steps} optimizer steps{first}, but the latest complete checkpoint holds the"
        f" state after {resume} steps, so steps {resume} to {total - 1} ({total - resume} steps) remained"
    )
    if steps == total:
        return said + ": it started again from step 0 instead of loading the checkpoint"
    if steps == total - resume + 1:
        return said + (
            ": it ran again a step the checkpoint already holds"
            " (store the number of steps done and resume at that index)"
        )
    if steps == total - resume - 1:
        return said + ": it skipped a step (the number of steps done is the index of the next step to run)"
    return said


def _summary(failures: list[str], total: int, advice: str) -> str:
    first = failures[0]
    others = len(failures) - 1
    more = f"; {others} other rank result{'s' if others > 1 else ''} wrong" if others else ""
    return f"{first}{more} [{total - len(failures)} of {total} right]. {advice}"


def _judge_relaunch(facts: Facts, check: str, advice: str, success: str) -> Outcome:
    total = good = 0
    failures: list[str] = []
    for g, i, case in _runs(facts, check):
        for r in range(g.world_size):
            total += 1
            got = result(g, i, r)
            why = _no_result(g, i, r) if not isinstance(got, dict) else _resume_problem(got, case.expected[r])
            if why is None:
                good += 1
            else:
                failures.append(f"{g.name}, rank {r}, {case.label}: {why}{_crash_note(facts, g)}")
    if not total:
        return Outcome(False, "no relaunch was run", fraction=0.0)
    if not failures:
        return Outcome(True, f"all {total} relaunched ranks {success}", fraction=1.0)
    return Outcome(False, _summary(failures, total, advice), {"first_failure": failures[0]}, fraction=good / total)


def resumes(facts: Facts) -> Outcome:
    return _judge_relaunch(
        facts,
        "resumes",
        "On start, find the newest checkpoint in CHECKPOINT_DIR, load the model and optimizer state from it,"
        " and continue with the step after the last one it holds.",
        "resumed from the latest checkpoint and finished",
    )


def half_written(facts: Facts) -> Outcome:
    return _judge_relaunch(
        facts,
        "half-written",
        "A checkpoint must appear under its final name only once it is complete: torch.save to a temporary"
        " name in the same folder, flush and os.fsync it, then os.replace it to the final name (or write a"
        " 'complete' marker after it), and only ever load complete checkpoints.",
        "skipped the half-written checkpoint and resumed from the previous one",
    )


def parameters(facts: Facts) -> Outcome:
    total = good = 0
    failures: list[str] = []
    for g, i, case in _runs(facts, "resumes") + _runs(facts, "half-written"):
        total += 1
        want = case.expected[0]["params"]
        got = result(g, i, 0)
        where = f"{g.name}, rank 0, {case.label}"
        if not isinstance(got, dict):
            failures.append(f"{where}: {_no_result(g, i, 0)}")
        elif got.get("exit") != 0 or "params" not in got:
            failures.append(
                f"{where}: no final parameters, the script exited with status {got.get('exit')}: "
                f"{_last_line(got.get('stderr', ''))}"
            )
        elif isinstance(got["params"], str):
            failures.append(f"{where}: {got['params']}")
        else:
            found = trees.compare(want, got["params"], {"params": TOLERANCE}, "params")
            if found is None:
                good += 1
            else:
                failures.append(f"{where}: {found}")
    if not total:
        return Outcome(False, "no relaunch was run", fraction=0.0)
    if not failures:
        return Outcome(True, f"the final parameters of all {total} relaunched runs equal uninterrupted training")
    advice = (
        "A checkpoint must hold everything training depends on: the model's parameters, the optimizer's"
        " state (SGD's momentum buffers) and the step count; restore all three before the next step."
    )
    return Outcome(False, _summary(failures, total, advice), {"first_failure": failures[0]}, fraction=good / total)


def environment(facts: Facts) -> Outcome:
    total = good = 0
    failures: list[str] = []
    for g, i, case in _runs(facts, "environment"):
        for r in range(g.world_size):
            total += 1
            got = result(g, i, r)
            unset = list(case.expected[r]["unset"])
            where = f"{g.name}, rank {r}, {case.label}"
            if not isinstance(got, dict):
                failures.append(f"{where}: {_no_result(g, i, r)}")
                continue
            stderr = str(got.get("stderr", ""))
            absent = [name for name in unset if name not in stderr]
            if got.get("exit") != EXIT_MISSING:
                status = got.get("exit")
                failures.append(
                    f"{where}: exit status {status}, expected {EXIT_MISSING}; stderr ends: {_last_line(stderr)}"
                )
            elif "Traceback (most recent call last)" in stderr:
                failures.append(f"{where}: the message came with a traceback: {_last_line(stderr)}")
            elif absent:
                failures.append(f"{where}: stderr does not name {', '.join(absent)}: {_last_line(stderr)}")
            else:
                good += 1
    if not total:
        return Outcome(False, "the script was not run without its environment", fraction=0.0)
    if not failures:
        return Outcome(True, f"all {total} ranks named the missing variables and exited with status {EXIT_MISSING}")
    advice = (
        f"Before anything else, check every variable the script needs; if any is missing, print one line to"
        f" stderr naming each missing one and exit with status {EXIT_MISSING} (sys.exit({EXIT_MISSING})), no traceback."
    )
    return Outcome(False, _summary(failures, total, advice), {"first_failure": failures[0]}, fraction=good / total)


RULES = {
    "resumes": resumes,
    "parameters": parameters,
    "half-written": half_written,
    "environment": environment,
}
