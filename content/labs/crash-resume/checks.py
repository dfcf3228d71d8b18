"""Trusted checks for crash-resume: the crashes the grader delivers, the uninterrupted reference, the rules.

Never mounted into the sandbox. Per world size: a first launch during which the zygote kills one
rank, from outside, when a chosen checkpoint appears in ``CHECKPOINT_DIR`` (``labs.rank.faults``), then
the same script relaunched on the same folder. Once more, at one world size: the rank writing a
checkpoint is killed while it writes it and the zygote cuts that file in half, then a relaunch.
The first launch of the first world size also runs the script once with some of torchrun's
variables unset. ``INIT_SEED`` is new at every launch: only a relaunch that restores the
checkpoint ends where uninterrupted training from the first launch's weights does.

What earns points is read outside the ranks: the parameters the relaunch left at
``FINAL_MODEL_PATH`` and the checkpoints, found by value in the files' bytes (``scan.locate``:
nothing the student wrote is ever loaded here), compared with ``task.reference``; and what the
zygote saw and did (the checkpoints published, the rank it killed, the file it cut). What the
driver counted inside the ranks (optimizer steps, batches) is only quoted in messages. The one
exception is the environment check, whose subject is the exit status and the message the script
itself gives.
"""

from __future__ import annotations

import re
from typing import Any

import torch

from labs.authoring import Case, Facts, GroupRun, Outcome, Phase, load_public, result, scan

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
    per = n // NODES.get(n, 1)
    return {
        "LOCAL_RANK": rank % per,
        "LOCAL_WORLD_SIZE": per,
        "GROUP_RANK": rank // per,
        "GROUP_WORLD_SIZE": n // per,
        "SEED": seed,
        "INIT_SEED": init,
        "TOTAL_STEPS": total,
        "CHECKPOINT_EVERY": every,
        "CHECKPOINT_DIR": f"{{shared}}/{folder}/{CHECKPOINTS}",
        "FINAL_MODEL_PATH": f"{{shared}}/{folder}/{FINAL}",
    }


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
        cases = [_case("crash", f"the first launch on {n} ranks", launch, {})]
        if i == 0:
            missing = [{"env": row["env"], "unset": unset} for row in launch]
            label = f"the script started without {', '.join(unset)}"
            cases.insert(0, _case("environment", label, missing, {"unset": unset}))
        watch = {"dir": f"{folder}/{CHECKPOINTS}", "pattern": PATTERN}
        out.append(
            Phase(
                "first launch",
                n,
                cases,
                expect_crash=True,
                fault=watch | {"kill": {"at": at, **victim}},
                shares_dir=True,
            )
        )
        label = f"relaunched on {n} ranks after {'a crash while saving' if check == 'half-written' else 'a crash'}"
        relaunch = [{"env": _env(n, r, folder, seed, again, total, every)} for r in range(n)]
        out.append(
            Phase("relaunch", n, [_case(check, label, relaunch, want)], fault=watch | {"kill": None}, shares_dir=True)
        )
    return out


def _case(check: str, label: str, inputs: list[dict[str, Any]], want: dict[str, Any]) -> Case:
    """One run of the script on every rank; ``expected[0]`` holds what the rules need (never compared whole)."""
    return Case(check=check, fn="main", driver="run", label=label, inputs=inputs, expected=[want] * len(inputs))


def _relaunches(facts: Facts, checks: tuple[str, ...]) -> list[tuple[GroupRun | None, GroupRun, int, Case]]:
    """(first launch's group, relaunch's group, case index, case) for each relaunch judging one of ``checks``."""
    out = []
    for k, g in enumerate(facts.groups):
        for i, case in enumerate(g.cases):
            if case.check in checks:
                out.append((facts.groups[k - 1] if k else None, g, i, case))
    return out


def _last_line(text: str) -> str:
    lines = [line.strip() for line in str(text).splitlines() if line.strip()]
    return lines[-1][:300] if lines else "(nothing on stderr)"


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
    fault = report.get("fault")
    if fault is None:
        at = int((first.fault or {}).get("kill", {}).get("at", 0))
        seen = [name for name, _ in report.get("published", [])]
        said = f" (it published only {', '.join(seen)})" if seen else ""
        return None, (
            f"the grader's crash never came: it was due when the checkpoint of step {at} appeared in"
            f" CHECKPOINT_DIR, and no file named step-<n>.pt with n >= {at} ever did{said}{_ended(first)}."
            " Save a checkpoint after every CHECKPOINT_EVERY steps, as CHECKPOINT_DIR/step-<n>.pt, n the number"
            " of steps done"
        )
    return fault, ""


def _ended(first: GroupRun) -> str:
    """How the first launch's script ended on rank 0, as the driver saw it (feedback)."""
    for i, case in enumerate(first.cases):
        got = result(first, i, 0) if case.check == "crash" else None
        if isinstance(got, dict) and got.get("exit") != 0:
            return f"; rank 0's script exited with status {got.get('exit')}: {_last_line(got.get('stderr', ''))}"
    return ""


def _counted(g: GroupRun, i: int) -> str:
    """What the driver counted in rank 0 (inside the rank: quoted, never judged)."""
    got = result(g, i, 0)
    if not isinstance(got, dict):
        return ""
    batches = list(got.get("batches") or [])
    first = f", the first for the batch of step {batches[0]}" if batches else ""
    return f" (the driver counted {got.get('optimizer_steps')} optimizer steps in rank 0{first})"


def _final(g: GroupRun, i: int, case: Case) -> tuple[str, str]:
    """What the relaunch left at FINAL_MODEL_PATH, read by value: (kind, what to say)."""
    want = case.expected[0]
    path = f"{want['folder']}/{FINAL}"
    data = g.files.get(path)
    if data is None and path in g.file_sizes:
        return "missing", "the grader could not read FINAL_MODEL_PATH: the phase left more files than it reads"
    if data is None:
        got = result(g, i, 0)
        said = ""
        if isinstance(got, dict):
            said = f": rank 0's script exited with status {got.get('exit')}: {_last_line(got.get('stderr', ''))}"
        return "missing", f"the relaunch left no file at FINAL_MODEL_PATH{said}"
    final = want["states"][-1]["params"]
    tensors = {("final", k): v for k, v in final.items()} | {("fresh", k): v for k, v in want["fresh"].items()}
    found = scan.locate({path: data}, tensors, *TOLERANCE)
    if all(found[("final", k)] for k in final):
        return "right", ""
    if all(found[("fresh", k)] for k in want["fresh"]):
        return "fresh", (
            "FINAL_MODEL_PATH holds the parameters of a run that started again from step 0, from the relaunch's"
            " own initial weights (INIT_SEED is new at every launch): the relaunch did not load the checkpoint"
        )
    missing = sorted(k for k in final if not found[("final", k)])
    return "other", (
        f"FINAL_MODEL_PATH does not hold the parameters of uninterrupted training after {want['total']} steps"
        f" ({', '.join(missing)} differ or are missing)"
    )


def _newest(names: list[str]) -> int | None:
    steps = [int(m.group(1)) for name in names if (m := re.match(PATTERN, name))]
    return max(steps) if steps else None


def _checkpoint_hint(first: GroupRun, relaunch: GroupRun, case: Case) -> str:
    """What the newest checkpoint the relaunch found holds, by value: the parameters, the momentum, both."""
    want = case.expected[0]
    newest = _newest(relaunch.fault_report.get("present", []))
    if newest is None:
        return ""
    name = next(
        (n for n in relaunch.fault_report.get("present", []) if (m := re.match(PATTERN, n)) and int(m[1]) == newest),
        "",
    )
    data = first.files.get(f"{want['folder']}/{CHECKPOINTS}/{name}")
    if data is None or newest >= len(want["states"]):
        return ""
    state = want["states"][newest]
    tensors = {("params", k): v for k, v in state["params"].items()} | {
        ("momentum", k): v for k, v in state["momentum"].items()
    }
    found = scan.locate({name: data}, tensors, *TOLERANCE)
    params = all(found[("params", k)] for k in state["params"])
    momentum = all(found[("momentum", k)] for k in state["momentum"])
    if params and not momentum:
        return (
            f". {name} holds the parameters after {newest} steps but not SGD's momentum buffers: save"
            " optimizer.state_dict() in the checkpoint with the model's and load both"
        )
    if params:
        return (
            f". {name} holds the whole state after {newest} steps (parameters and momentum): restore both and"
            f" continue with step {newest}, the number of steps done, so no step runs twice"
        )
    return f". {name} does not hold the parameters after {newest} steps: save model.state_dict() in it"


def _republished(relaunch: GroupRun) -> str | None:
    """A checkpoint the relaunch published again although the folder already held it (or a newer one)."""
    newest = _newest(relaunch.fault_report.get("present", []))
    if newest is None:
        return None
    again = [(name, step) for name, step in relaunch.fault_report.get("published", []) if int(step) <= newest]
    if not again:
        return None
    name, step = again[0]
    return (
        f"the relaunch wrote {name} (the state after {step} steps) although CHECKPOINT_DIR already held the"
        f" checkpoint of step {newest}: it ran again steps that checkpoint holds, so it did not resume from the"
        " newest complete checkpoint"
    )


def _summary(failures: list[str], total: int, advice: str) -> str:
    first = failures[0]
    others = len(failures) - 1
    more = f"; {others} other relaunch{'es' if others > 1 else ''} wrong" if others else ""
    return f"{first}{more} [{total - len(failures)} of {total} right]. {advice}"


def _judge(facts: Facts, checks: tuple[str, ...], verdict: Any, advice: str, success: str) -> Outcome:
    total = 0
    failures: list[str] = []
    late: list[str] = []
    for first, g, i, case in _relaunches(facts, checks):
        fault, why = _crash(first)
        where = f"{g.phase} on {g.world_size} ranks"
        if fault is not None and first is not None and f"{case.expected[0]['folder']}/{FINAL}" in first.file_sizes:
            # The first launch had written FINAL_MODEL_PATH: training was over before the crash landed (a loaded
            # machine delays the zygote), so this relaunch tests nothing. Never a point: it is left out.
            late.append(where)
            continue
        total += 1
        if fault is None:
            failures.append(f"{where}: {why}")
            continue
        why = _not_run(g) or verdict(first, g, i, case, fault)
        if why:
            failures.append(f"{where}, after {_what(fault)}: {why}")
    skipped = (
        f" ({len(late)} first launch{'es' if len(late) > 1 else ''} had written FINAL_MODEL_PATH before the grader's"
        " crash landed, so their relaunches were not judged)"
        if late
        else ""
    )
    if not total:
        return Outcome(False, f"no relaunch could be judged{skipped}", fraction=0.0)
    if not failures:
        return Outcome(True, f"all {total} relaunches {success}{skipped}", fraction=1.0)
    fraction = (total - len(failures)) / total
    message = _summary(failures, total, advice) + skipped
    return Outcome(False, message, {"first_failure": failures[0]}, fraction)


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
    if kind in ("missing", "fresh"):
        return said + _counted(g, i)
    return _republished(g)


def _parameters(first: GroupRun, g: GroupRun, i: int, case: Case, fault: dict[str, Any]) -> str | None:
    kind, said = _final(g, i, case)
    if kind == "right":
        return None
    return said + (_checkpoint_hint(first, g, case) if kind == "other" else "")


def _survived_cut(first: GroupRun, g: GroupRun, i: int, case: Case, fault: dict[str, Any]) -> str | None:
    if not fault.get("completed"):
        error = (
            first.fault_report.get("error")
            or "the file being written was neither in CHECKPOINT_DIR nor renamed into it"
        )
        return f"the grader could not leave CHECKPOINT_DIR as a crash in the middle of the save would: {error}"
    kind, said = _final(g, i, case)
    return said + _counted(g, i) if kind in ("missing", "fresh") else None


def resumes(facts: Facts) -> Outcome:
    return _judge(
        facts,
        ("resumes",),
        _resumed,
        "On start, find the newest checkpoint in CHECKPOINT_DIR, load the model and optimizer state from it,"
        " and continue with the step after the last one it holds.",
        "loaded the newest checkpoint and finished without running a saved step again",
    )


def parameters(facts: Facts) -> Outcome:
    return _judge(
        facts,
        ("resumes", "half-written"),
        _parameters,
        "A checkpoint must hold everything training depends on: the model's parameters, the optimizer's"
        " state (SGD's momentum buffers) and the number of steps done; restore all three before the next step.",
        "ended with the parameters of uninterrupted training",
    )


def half_written(facts: Facts) -> Outcome:
    return _judge(
        facts,
        ("half-written",),
        _survived_cut,
        "A checkpoint must appear under its final name only once it is complete: torch.save to a temporary"
        " name in the same folder, flush and os.fsync it, then os.replace it to CHECKPOINT_DIR/step-<n>.pt,"
        " and only ever load files with that name.",
        "skipped the half-written checkpoint, resumed from the one before it and finished",
    )


def environment(facts: Facts) -> Outcome:
    """The script's own exit status and message with variables missing: what it says is the subject here."""
    total = good = 0
    failures: list[str] = []
    for g in facts.groups:
        for i, case in enumerate(g.cases):
            if case.check != "environment":
                continue
            unset = list(case.expected[0]["unset"])
            for r in range(g.world_size):
                total += 1
                got = result(g, i, r)
                where = f"{g.phase} on {g.world_size} ranks, rank {r}, {case.label}"
                if not isinstance(got, dict):
                    failures.append(f"{where}: {_not_run(g) or 'no result: the rank ended before the script did'}")
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
    first = failures[0]
    more = (
        f"; {len(failures) - 1} other rank result{'s' if len(failures) > 2 else ''} wrong" if len(failures) > 1 else ""
    )
    return Outcome(False, f"{first}{more} [{good} of {total} right]. {advice}", {"first_failure": first}, good / total)


RULES = {
    "resumes": resumes,
    "parameters": parameters,
    "half-written": half_written,
    "environment": environment,
}
