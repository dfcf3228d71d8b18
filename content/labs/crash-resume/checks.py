"""Trusted checks for crash-resume: the crashes the grader delivers, the uninterrupted reference, the rules.

Never mounted into the sandbox. Per world size: a first launch during which the zygote kills one rank,
from outside, when a chosen checkpoint appears in ``CHECKPOINT_DIR`` (``labs.rank.faults``), then the
same script relaunched on the same folder; once more, at one world size, the rank writing a checkpoint
is killed mid-write and the zygote cuts that file in half. The first launch also runs the script once
with some of torchrun's variables unset. ``INIT_SEED`` is new at every launch: only a relaunch that
restores the checkpoint ends where uninterrupted training from the first launch's weights does.

What earns points is read outside the ranks: the parameters at ``FINAL_MODEL_PATH`` and in the
checkpoints, found by value in the files' bytes (``scan.locate``: nothing the student wrote is loaded
here) and compared with ``task.reference``, and what the zygote saw and did. What the driver counted
inside the ranks is only quoted. The exception is the environment check, whose subject is the exit
status and the message the script itself gives.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

import torch

from labs.authoring import UNJUDGED, Case, Facts, GroupRun, Outcome, Phase, load_public, result, scan, tallies, training

TORCHRUN = ("RANK", "WORLD_SIZE", "LOCAL_RANK", "MASTER_ADDR", "MASTER_PORT")
NODES = {2: 2, 3: 3, 4: 2}  # nodes the ranks of each world size are spread over
TOLERANCE = (1e-9, 1e-11)  # float64; DDP sums the ranks' gradients in another order than one process
EXIT_MISSING = 2
PATTERN = r"^step-(\d+)\.pt$"  # a complete checkpoint's name in CHECKPOINT_DIR: the number of steps done
CHECKPOINTS, FINAL = "checkpoints", "final.pt"  # CHECKPOINT_DIR and FINAL_MODEL_PATH in a launch's folder


def _draw(gen: torch.Generator, low: int, high: int) -> int:
    """An integer in [low, high], from the grade's generator."""
    return int(torch.randint(low, high + 1, (1,), generator=gen))


def _env(n: int, rank: int, folder: str, seed: int, init: int, total: int, every: int) -> dict[str, Any]:
    """The launch's variables for ``rank``, beside torchrun's own that it holds; the rank fills in ``{shared}``."""
    per = n // NODES.get(n, 1)
    place = {"LOCAL_RANK": rank % per, "LOCAL_WORLD_SIZE": per, "GROUP_RANK": rank // per, "GROUP_WORLD_SIZE": n // per}
    job = {"SEED": seed, "INIT_SEED": init, "TOTAL_STEPS": total, "CHECKPOINT_EVERY": every}
    paths = {"CHECKPOINT_DIR": f"{{shared}}/{folder}/{CHECKPOINTS}", "FINAL_MODEL_PATH": f"{{shared}}/{folder}/{FINAL}"}
    return place | job | paths


def phases(world_sizes: list[int], gen: torch.Generator) -> list[Phase]:
    """Two groups per crash: a first launch the zygote crashes, then a relaunch on the same folder.

    What a rank can see of the job it is forked with (phase names, folders, world sizes, the order
    of the launches) says nothing of the crash to come: every launch is named alike, the launches
    (one per world size and one more) come in an order drawn per grading, and which of them is
    crashed while saving is drawn apart from that. The plan is in ``Phase.fault``, which only the
    zygote receives.
    """
    task = load_public(__file__, "task")
    seed = int(torch.randint(0, 2**31 - 1, (1,), generator=gen))
    every = _draw(gen, 2, 3)
    total = every * 6 + _draw(gen, 0, every - 1)  # 12 to 20 steps, 6 checkpoints
    unset = [TORCHRUN[i] for i in torch.randperm(len(TORCHRUN), generator=gen)[: _draw(gen, 1, 2)].tolist()]
    inits = iter(torch.randperm(2**20, generator=gen)[: 2 * len(world_sizes) + 2].tolist())
    sizes = [*world_sizes, world_sizes[_draw(gen, 0, len(world_sizes) - 1)]]
    sizes = [sizes[j] for j in torch.randperm(len(sizes), generator=gen).tolist()]
    saving = _draw(gen, 0, len(sizes) - 1)
    crashes: list[tuple[int, int, dict[str, Any]]] = []
    for j, n in enumerate(sizes):
        if j == saving:  # killed while writing the checkpoint of step 2k or 3k: one (k or 2k) is complete
            crashes.append((n, _draw(gen, 2, 3) * every, {"writer": True, "cut": True}))
        else:  # killed when the checkpoint of step k or 2k appears, a rank other than the one writing it
            crashes.append((n, _draw(gen, 1, 2) * every, {"rank": _draw(gen, 1, n - 1)}))
    # At least 3k steps remain after the crash: the zygote sees a checkpoint some milliseconds after it
    # appears (up to tens on a loaded machine), and the run must not be over by then.
    out: list[Phase] = []
    for i, (n, at, victim) in enumerate(crashes):
        folder = f"job-{i + 1}"
        first, again = next(inits), next(inits)
        check = "half-written" if victim.get("cut") else "resumes"
        want = {
            "folder": folder,
            "total": total,
            "states": task.reference(seed, first, total),
            "fresh": task.reference(seed, again, total)[-1]["params"],
        }
        launch = [{"env": _env(n, r, folder, seed, first, total, every)} for r in range(n)]
        cases = [_case(UNJUDGED, f"the first launch on {n} ranks", launch, {})]  # it only has to crash
        if i == 0:
            missing = [{"env": row["env"], "unset": unset} for row in launch]
            label = f"the script started without {', '.join(unset)}"
            cases.insert(0, _case("environment", label, missing, {"unset": unset}))
        watch = {"dir": f"{folder}/{CHECKPOINTS}", "pattern": PATTERN}
        kill = {"kill": {"at": at, **victim}}
        out.append(Phase("first launch", n, cases, expect_crash=True, fault=watch | kill, shares_dir=True))
        label = f"relaunched on {n} ranks after {'a crash while saving' if check == 'half-written' else 'a crash'}"
        relaunch = [{"env": _env(n, r, folder, seed, again, total, every)} for r in range(n)]
        case = _case(check, label, relaunch, want)
        out.append(Phase("relaunch", n, [case], fault=watch | {"kill": None}, shares_dir=True))
    return out


def _case(check: str, label: str, inputs: list[dict[str, Any]], want: dict[str, Any]) -> Case:
    """One run of the script on every rank; ``expected[0]`` holds what the rules need (never compared whole)."""
    return Case(check=check, fn="main", driver="run", label=label, inputs=inputs, expected=[want] * len(inputs))


def _relaunches(facts: Facts, checks: tuple[str, ...]) -> list[tuple[GroupRun | None, GroupRun, int, Case]]:
    """(first launch's group, relaunch's group, case index, case) for each relaunch judging one of ``checks``."""
    return [
        (facts.groups[k - 1] if k else None, g, i, case)
        for k, g in enumerate(facts.groups)
        for i, case in enumerate(g.cases)
        if case.check in checks
    ]


def _last_line(text: str) -> str:
    lines = [line.strip() for line in str(text).splitlines() if line.strip()]
    return lines[-1][:300] if lines else "(nothing on stderr)"


def _exited(got: dict[str, Any]) -> str:
    """How rank 0's script ended, as the driver saw it (feedback)."""
    return f"rank 0's script exited with status {got.get('exit')}: {_last_line(got.get('stderr', ''))}"


def _not_run(g: GroupRun | None) -> str | None:
    if g is None or g.status is None:
        return "not run: an earlier phase ended the grading"
    if g.status not in ("ok", "crashed"):
        ended = {"deadlock": "the ranks hung (deadlock)", "time_limit": "the time limit ran out"}
        return f"the {g.phase} ended early: {ended.get(g.status, g.status)}"
    return None


def _crash(first: GroupRun | None) -> tuple[dict[str, Any] | None, str]:
    """The fault the zygote delivered in the first launch, or None and why there was none."""
    why = _not_run(first)
    if why or first is None:
        return None, why or "not run"
    report = first.fault_report
    if report.get("error"):
        return None, f"the grader could not deliver its crash: {report['error']}"
    if report.get("fault") is None:
        at = int((first.fault or {}).get("kill", {}).get("at", 0))
        seen = [name for name, _ in report.get("published", [])]
        said = f" (it published only {', '.join(seen)})" if seen else ""
        got = result(first, len(first.cases) - 1, 0)  # the launch's own case comes last (after "environment")
        said += f"; {_exited(got)}" if isinstance(got, dict) and got.get("exit") != 0 else ""
        return None, (
            f"the grader's crash never came: it was due when the checkpoint of step {at} appeared in"
            f" CHECKPOINT_DIR, and no file named step-<n>.pt with n >= {at} ever did{said}."
            " Save a checkpoint after every CHECKPOINT_EVERY steps, as CHECKPOINT_DIR/step-<n>.pt, n the number"
            " of steps done"
        )
    return report["fault"], ""


def _counted(g: GroupRun, i: int) -> str:
    """What the driver counted in rank 0 (inside the rank: quoted, never judged)."""
    got = result(g, i, 0)
    if not isinstance(got, dict):
        return ""
    batches = list(got.get("batches") or [])
    first = f", the first for the batch of step {batches[0]}" if batches else ""
    return f" (the driver counted {got.get('optimizer_steps')} optimizer steps in rank 0{first})"


def _missing(name: str, data: bytes, trees: dict[str, dict[str, torch.Tensor]]) -> dict[str, list[str]]:
    """For each tree of tensors, the names of those the file's bytes do not hold (found by value, never loaded)."""
    found = scan.locate({name: data}, {(t, k): v for t, tree in trees.items() for k, v in tree.items()}, *TOLERANCE)
    return {t: sorted(k for k in tree if not found[(t, k)]) for t, tree in trees.items()}


def _final(g: GroupRun, i: int, case: Case) -> tuple[str, str]:
    """What the relaunch left at FINAL_MODEL_PATH, read by value: (kind, what to say)."""
    want = case.expected[0]
    path = f"{want['folder']}/{FINAL}"
    data = g.files.get(path)
    if data is None and path in g.file_sizes:
        return "missing", "the grader could not read FINAL_MODEL_PATH: the phase left more files than it reads"
    if data is None:
        got = result(g, i, 0)
        return "missing", "the relaunch left no file at FINAL_MODEL_PATH" + (
            f": {_exited(got)}" if isinstance(got, dict) else ""
        )
    missing = _missing(path, data, {"final": want["states"][-1]["params"], "fresh": want["fresh"]})
    if not missing["final"]:
        return "right", ""
    if not missing["fresh"]:
        return "fresh", (
            "FINAL_MODEL_PATH holds the parameters of a run that started again from step 0, from the relaunch's"
            " own initial weights (INIT_SEED is new at every launch): the relaunch did not load the checkpoint"
        )
    return "other", (
        f"FINAL_MODEL_PATH does not hold the parameters of uninterrupted training after {want['total']} steps"
        f" ({', '.join(missing['final'])} differ or are missing)"
    )


def _newest(relaunch: GroupRun) -> tuple[int, str] | None:
    """The newest complete checkpoint the relaunch found in CHECKPOINT_DIR: (its step, its name)."""
    found = [(int(m[1]), name) for name in relaunch.fault_report.get("present", []) if (m := re.match(PATTERN, name))]
    return max(found, key=lambda f: f[0]) if found else None


def _checkpoint_hint(first: GroupRun, relaunch: GroupRun, case: Case) -> str:
    """What the newest checkpoint the relaunch found holds, by value: the parameters, the momentum, both."""
    want, newest = case.expected[0], _newest(relaunch)
    if newest is None:
        return ""
    step, name = newest
    data = first.files.get(f"{want['folder']}/{CHECKPOINTS}/{name}")
    if data is None or step >= len(want["states"]):
        return ""
    missing = _missing(name, data, want["states"][step])
    if missing["params"]:
        return f". {name} does not hold the parameters after {step} steps: save model.state_dict() in it"
    if missing["momentum"]:
        return (
            f". {name} holds the parameters after {step} steps but not SGD's momentum buffers: save"
            " optimizer.state_dict() in the checkpoint with the model's and load both"
        )
    return (
        f". {name} holds the whole state after {step} steps (parameters and momentum): restore both and"
        f" continue with step {step}, the number of steps done, so no step runs twice"
    )


def _republished(relaunch: GroupRun) -> str | None:
    """A checkpoint the relaunch published again although the folder already held it (or a newer one)."""
    newest = _newest(relaunch)
    again = [(name, step) for name, step in relaunch.fault_report.get("published", []) if newest and step <= newest[0]]
    if not again or newest is None:
        return None
    name, step = again[0]
    return (
        f"the relaunch wrote {name} (the state after {step} steps) although CHECKPOINT_DIR already held the"
        f" checkpoint of step {newest[0]}: it ran again steps that checkpoint holds, so it did not resume from the"
        " newest complete checkpoint"
    )


# Why a relaunch is wrong, or None: (first launch, relaunch, case index, case, the fault delivered).
Verdict = Callable[[GroupRun, GroupRun, int, Case, dict[str, Any]], str | None]


def _judge(facts: Facts, checks: tuple[str, ...], verdict: Verdict, advice: str, success: str) -> Outcome:
    """Every relaunch judging one of ``checks`` by ``verdict``, once its first launch was crashed as planned."""
    tally = tallies.Tally(unit="wrong relaunch", empty="no relaunch could be judged")
    late = 0
    for first, g, i, case in _relaunches(facts, checks):
        fault, why = _crash(first)
        where = f"{g.phase} on {g.world_size} ranks"
        if fault is None or first is None:
            tally.add(f"{where}: {why}")
        elif f"{case.expected[0]['folder']}/{FINAL}" in first.file_sizes:
            # The first launch had written FINAL_MODEL_PATH: training was over before the crash landed (a loaded
            # machine delays the zygote), so this relaunch tests nothing. Never a point: it is left out.
            late += 1
        else:
            wrong = _not_run(g) or verdict(first, g, i, case, fault)
            tally.add(f"{where}, after {_what(fault)}: {wrong}" if wrong else None)
    data = {"first_failure": tally.problems[0]} if tally.problems else {}
    outcome = tally.outcome(f"all {tally.total} relaunches {success}", data, advice=advice, score=True)
    if late:
        outcome.message += (
            f" ({late} first launch{'es' if late > 1 else ''} had written FINAL_MODEL_PATH before the grader's"
            " crash landed, so their relaunches were not judged)"
        )
    return outcome


def _what(fault: dict[str, Any]) -> str:
    """The crash as the grader delivered it, in words (after the fact)."""
    said = f"rank {fault['rank']} was killed when {fault['name']} appeared"
    cut = fault.get("cut")
    if cut and cut["bytes"]:
        said += f" (it was writing {cut['file']}, cut to {cut['kept']:,} of its {cut['bytes']:,} bytes)"
    elif cut:
        said += f" (it had just created {cut['file']}, which held no bytes yet)"
    elif fault.get("completed") and fault["name"] in fault.get("removed", []):
        said += f" (it had written {fault['name']} outside CHECKPOINT_DIR: its rename into the folder was undone)"
    return said


def _resumed(first: GroupRun, g: GroupRun, i: int, case: Case, fault: dict[str, Any]) -> str | None:
    kind, said = _final(g, i, case)
    return said + _counted(g, i) if kind in ("missing", "fresh") else _republished(g)


def _parameters(first: GroupRun, g: GroupRun, i: int, case: Case, fault: dict[str, Any]) -> str | None:
    kind, said = _final(g, i, case)
    return None if kind == "right" else said + (_checkpoint_hint(first, g, case) if kind == "other" else "")


def _survived_cut(first: GroupRun, g: GroupRun, i: int, case: Case, fault: dict[str, Any]) -> str | None:
    if not fault.get("completed"):
        error = (
            first.fault_report.get("error")
            or "the file being written was neither in CHECKPOINT_DIR nor renamed into it"
        )
        return f"the grader could not leave CHECKPOINT_DIR as a crash in the middle of the save would: {error}"
    kind, said = _final(g, i, case)
    return said + _counted(g, i) if kind in ("missing", "fresh") else None


RESUME = (
    "On start, find the newest checkpoint in CHECKPOINT_DIR, load the model and optimizer state from it,"
    " and continue with the step after the last one it holds."
)
WHOLE_STATE = (
    "A checkpoint must hold everything training depends on: the model's parameters, the optimizer's"
    " state (SGD's momentum buffers) and the number of steps done; restore all three before the next step."
)
ATOMIC = (
    "A checkpoint must appear under its final name only once it is complete: torch.save to a temporary"
    " name in the same folder, flush and os.fsync it, then os.replace it to CHECKPOINT_DIR/step-<n>.pt,"
    " and only ever load files with that name."
)


def resumes(facts: Facts) -> Outcome:
    success = "loaded the newest checkpoint and finished without running a saved step again"
    return _judge(facts, ("resumes",), _resumed, RESUME, success)


def parameters(facts: Facts) -> Outcome:
    success = "ended with the parameters of uninterrupted training"
    return _judge(facts, ("resumes", "half-written"), _parameters, WHOLE_STATE, success)


def half_written(facts: Facts) -> Outcome:
    success = "skipped the half-written checkpoint, resumed from the one before it and finished"
    return _judge(facts, ("half-written",), _survived_cut, ATOMIC, success)


def _environment_wrong(g: GroupRun, i: int, case: Case, r: int) -> str | None:
    """Why rank ``r``'s script, started without some of torchrun's variables, did not say so as it must."""
    got = result(g, i, r)
    where = f"{g.phase} on {g.world_size} ranks, rank {r}, {case.label}"
    if not isinstance(got, dict):
        return f"{where}: {_not_run(g) or 'no result: the rank ended before the script did'}"
    stderr = str(got.get("stderr", ""))
    absent = [name for name in case.expected[0]["unset"] if name not in stderr]
    if got.get("exit") != EXIT_MISSING:
        return f"{where}: exit status {got.get('exit')}, expected {EXIT_MISSING}; stderr ends: {_last_line(stderr)}"
    if "Traceback (most recent call last)" in stderr:
        return f"{where}: the message came with a traceback: {_last_line(stderr)}"
    if absent:
        return f"{where}: stderr does not name {', '.join(absent)}: {_last_line(stderr)}"
    return None


def environment(facts: Facts) -> Outcome:
    """The script's own exit status and message with variables missing: what it says is the subject here."""
    tally = tallies.Tally(unit="wrong rank", empty="the script was not run without its environment")
    for g, i, case in training.cases_judging(facts, "environment"):
        for r in range(g.world_size):
            tally.add(_environment_wrong(g, i, case, r))
    advice = (
        f"Before anything else, check every variable the script needs; if any is missing, print one line to"
        f" stderr naming each missing one and exit with status {EXIT_MISSING} (sys.exit({EXIT_MISSING})), no traceback."
    )
    success = f"all {tally.total} ranks named the missing variables and exited with status {EXIT_MISSING}"
    data = {"first_failure": tally.problems[0]} if tally.problems else {}
    return tally.outcome(success, data, advice=advice, score=True)


RULES = {
    "resumes": resumes,
    "parameters": parameters,
    "half-written": half_written,
    "environment": environment,
}
