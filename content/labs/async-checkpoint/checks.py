"""Trusted checks for async-checkpoint: three training runs per grading, judged by the files they leave.

Never mounted into the sandbox. Every run trains the same seeded MLP (float64, SGD with momentum) and
saves through the student's ``AsyncCheckpointer`` every ``every`` steps, writing only through the
driver's ``Storage``: a disk that holds each write until the loop waits in a later ``save`` or in
``wait`` (so a checkpoint shows what ``state`` held then) and drops a write still in flight when a
later ``save`` or ``wait`` returns. At the first world size a *strict* run, then a run whose write of
one step crashes the process half-way (writes not held); at the last world size a *held* run, in
which a write is never released while the loop is inside the save that started it, so that a save
waiting for its own write hangs. The strict run and the held run (unless it hung) are both judged
for the copies and the checkpoints on disk.

What earns points is read here, outside the ranks, from the files each run left (``GroupRun.files``,
read after the ranks had exited): the tensors a checkpoint holds, found by value in its bytes
(``scan.locate``: no file is unpickled) and compared with ``driver.reference``, one process trained on
the whole batches; which checkpoints exist; whether a file is a whole ``torch.save`` archive (its zip
directory, written last, read with ``zipfile``); and whether the held run ended or hung, as the zygote
saw it. What the storage reports from inside a rank is only quoted.
"""

from __future__ import annotations

import io
import re
import zipfile
from collections.abc import Iterator
from typing import Any

import torch

from labs.authoring import Case, Facts, GroupRun, Outcome, Phase, load_public, result, scan, tallies

DRIVER = load_public(__file__, "driver")
DIMS = [6, 12, 3]  # 123 float64 parameters: a checkpoint of about 5 KB (parameters and momentum)
BATCH = 8  # the global batch of every step: equal shares on 1 and 2 ranks
SAVES = 4  # checkpoints per run
HYPER = {"lr": 0.1, "momentum": 0.9, "weight_decay": 0.01}
TOLERANCE = (1e-9, 1e-12)  # float64; two ranks average their gradients in another order than one process
NAME = re.compile(r"^step-(\d+)\.pt$")  # a checkpoint under its final name


def _draw(gen: torch.Generator, low: int, high: int) -> int:
    """An integer in [low, high], from the grading's generator."""
    return int(torch.randint(low, high + 1, (1,), generator=gen))


def phases(world_sizes: list[int], gen: torch.Generator) -> list[Phase]:
    """One group per world size, in one shared directory: at the first a strict run, then the run with a crash;
    at the last the held run (last of all: a save that waits for its own write hangs the group there)."""
    every = _draw(gen, 2, 3)
    common: dict[str, Any] = {
        "seed": _draw(gen, 0, 2**31 - 2),
        "dims": DIMS,
        "batch": BATCH,
        **HYPER,
        "steps": SAVES * every,
        "every": every,
    }
    states = DRIVER.reference(common)
    # A checkpoint is complete before it, and a later save follows: a save waits for the write in flight, so the
    # crash comes before the run can end, whatever wait() does (a run that ended first would test nothing).
    crash_at = _draw(gen, 2, SAVES - 1) * every
    first, last = world_sizes[0], world_sizes[-1]
    marks = iter(torch.rand(3, 4, generator=gen, dtype=torch.float64) + 1)  # what write() adds to each run's files

    def run(check: str, n: int, mode: str, **more: Any) -> Case:
        return _run(check, common | {"mode": mode, "folder": f"w{n}-{mode}", "mark": next(marks), **more}, n, states)

    strict = run("snapshot", first, "strict")
    crash = run("crash-safe", first, "crash", crash_at=crash_at)
    held = run("non-blocking", last, "held")
    return [
        Phase(None, first, [strict, crash], expect_crash=True, shares_dir=True),
        Phase(None, last, [held], shares_dir=True),
    ]


def _run(check: str, inputs: dict[str, Any], n: int, states: list[dict[str, torch.Tensor]]) -> Case:
    steps, every = int(inputs["steps"]), int(inputs["every"])
    label = {
        "strict": f"{steps} steps, save() after every {every}, then wait()",
        "crash": f"{steps} steps, save() after every {every}; the write of step {inputs.get('crash_at')} crashes",
        "held": f"{steps} steps, save() after every {every}, with writes held until a later save() or wait()",
    }[str(inputs["mode"])]
    # expected[r]: what the rules need (never compared whole: every check has a rule)
    want = {"states": states, "saved": list(range(every, steps + 1, every))}
    return Case(check, "AsyncCheckpointer", label, [dict(inputs) for _ in range(n)], [want] * n, driver="train")


# ---- reading a run's files ---------------------------------------------------------------------------------


def _runs(facts: Facts, *modes: str) -> Iterator[tuple[GroupRun, int, Case]]:
    for g in facts.groups:
        for i, case in enumerate(g.cases):
            if case.inputs[0].get("mode") in modes:
                yield g, i, case


def _hung(g: GroupRun, i: int) -> bool:
    """The call never returned on some rank because the group hung (the zygote's verdict, from outside)."""
    return g.status in ("deadlock", "time_limit") and any(result(g, i, r) is None for r in range(g.world_size))


def _saving(facts: Facts) -> Iterator[tuple[GroupRun, int, Case]]:
    """The runs judged for their checkpoints: the strict ones, and the held ones unless they hung (that is
    non-blocking's to judge: a check that holds on its own is not failed for it)."""
    for g, i, case in _runs(facts, "strict", "held"):
        if not (case.inputs[0]["mode"] == "held" and _hung(g, i)):
            yield g, i, case


def _checkpoints(g: GroupRun, case: Case, rank: int) -> dict[int, bytes | None]:
    """The files named ``step-<n>.pt`` in the rank's folder, by step (None: too large for the grader to read)."""
    prefix = f"{case.inputs[0]['folder']}/rank-{rank}/"
    out: dict[int, bytes | None] = {}
    for path in g.file_sizes:
        if path.startswith(prefix) and (m := NAME.match(path[len(prefix) :])):
            out[int(m[1])] = g.files.get(path)
    return out


def _where(g: GroupRun, case: Case, rank: int) -> str:
    run = {"strict": "the strict run", "held": "the held run", "crash": "the run with a crash"}
    return f"{run[str(case.inputs[0]['mode'])]}, world size {g.world_size}, rank {rank}"


def _error(g: GroupRun, i: int, rank: int) -> str:
    """How the rank's call ended, when it did not return: its error, or how the group ended ("" if it returned)."""
    run = g.ranks[rank]
    for e in run.errors:
        if e.get("call") == i or e.get("phase") == "import":
            return f"{e.get('error')}: {str(e.get('message'))[:300]}"
    if g.status is None:
        return "it was not run: an earlier group ended the grading"
    if result(g, i, rank) is None:
        return f"the rank ended without a result ({str(g.status).replace('_', ' ')})"
    return ""


def _report(g: GroupRun, i: int, rank: int) -> dict[str, Any]:
    """What the storage saw in the rank (quoted, never judged)."""
    got = result(g, i, rank)
    return got if isinstance(got, dict) else {}


def archive_state(data: bytes) -> str:
    """``"whole"``: a whole ``torch.save`` archive: its zip directory (written last) lists stored entries, data.pkl
    among them, whose bytes are all there with their CRCs right. ``"changed"``: all there, but an entry's bytes do
    not match the CRC written beside them (a tensor changed while ``torch.save`` was writing it: a question for
    the snapshot check, not of how the file was put on disk). ``"torn"``: anything else. Read with zipfile;
    nothing is unpickled."""
    state = "whole"
    try:
        with zipfile.ZipFile(io.BytesIO(data)) as archive:
            entries = archive.infolist()
            if not any(e.filename.rsplit("/", 1)[-1] == "data.pkl" for e in entries):
                return "torn"
            for entry in entries:
                if entry.compress_type != zipfile.ZIP_STORED or entry.file_size > len(data):
                    return "torn"
                try:
                    archive.read(entry)
                except zipfile.BadZipFile as exc:
                    if not str(exc).startswith("Bad CRC-32"):
                        raise
                    state = "changed"
    except (zipfile.BadZipFile, zipfile.LargeZipFile, OSError, ValueError, EOFError, KeyError, NotImplementedError):
        return "torn"
    return state


# ---- snapshot: each checkpoint holds the state of its step -------------------------------------------------

COPY = (
    "save() must copy every tensor of the state (the model's and the optimizer's, nested ones included:"
    " .clone(), or copy.deepcopy) before it returns: the loop updates the live tensors in place."
)


def _holds_float32(data: bytes, state: dict[str, torch.Tensor]) -> bool:
    """The file holds every parameter of ``state`` rounded to float32 (an exact run of float32 values)."""
    for name, tensor in state.items():
        if not name.startswith("model."):
            continue
        want = tensor.reshape(-1).float()
        anchor = int(torch.argmax(want.abs()))
        found = False
        for offset in range(4):
            count = (len(data) - offset) // 4
            if count < want.numel() or found:
                continue
            view = torch.frombuffer(bytearray(data[offset : offset + 4 * count]), dtype=torch.float32)
            for at in (view == want[anchor]).nonzero().reshape(-1).tolist()[:64]:
                start = at - anchor
                if 0 <= start <= count - want.numel() and torch.equal(view[start : start + want.numel()], want):
                    found = True
                    break
        if not found:
            return False
    return True


def _steps_holding(found: set[tuple[int, str]], states: list[dict[str, torch.Tensor]], prefix: str) -> list[int]:
    """The steps whose every tensor named ``prefix...`` the file holds."""
    out = []
    for t, state in enumerate(states):
        names = [n for n in state if n.startswith(prefix)]
        if names and all((t, n) in found for n in names):
            out.append(t)
    return out


def _snapshot_problem(data: bytes, step: int, states: list[dict[str, torch.Tensor]]) -> tuple[str | None, str]:
    """Why ``step-<step>.pt`` does not hold the state after ``step`` steps (None: it does), and the advice."""
    wanted = {(t, n): tensor for t, state in enumerate(states) for n, tensor in state.items()}
    located = scan.locate({"file": data}, wanted, *TOLERANCE)
    found = {key for key, files in located.items() if files}
    model, momentum = _steps_holding(found, states, "model."), _steps_holding(found, states, "momentum.")
    if step in model and step in momentum:
        return None, ""
    if step in model:
        later = [t for t in momentum if t > step]
        if later:
            return (
                f"holds the parameters after step {step} but the momentum buffers after step {later[0]}: the"
                " optimizer's state was not copied, and the write read it after training had gone on",
                COPY,
            )
        return f"holds the parameters after step {step} but not the momentum buffers of that step", COPY
    later = [t for t in model if t > step]
    if later:
        return (
            f"holds the parameters after step {later[0]}, not after step {step}: the write read the live"
            f" tensors when the storage ran it, {later[0] - step} steps later",
            COPY + " A tensor's .to('cpu') or .cpu() returns that same tensor when it is already on the CPU.",
        )
    if _holds_float32(data, states[step]):
        return (
            f"holds the parameters after step {step} rounded to float32: the model trains in float64",
            "Copy the tensors as they are, in their own dtype: a checkpoint must restore training exactly.",
        )
    return f"does not hold the parameters after step {step} (nor those of any other step) in float64", ""


def snapshot(facts: Facts) -> Outcome:
    tally = tallies.Tally(unit="checkpoint", empty="no run could be judged")
    for g, _, case in _saving(facts):
        states = case.expected[0]["states"]
        for r in range(g.world_size):
            for step, data in sorted(_checkpoints(g, case, r).items()):
                where = f"{_where(g, case, r)}: step-{step}.pt"
                if data is None:
                    tally.add(f"{where} was too large for the grader to read")
                elif not 1 <= step < len(states):
                    tally.add(f"{where} names a step the run never saved")
                else:
                    problem, advice = _snapshot_problem(data, step, states)
                    tally.add(f"{where} {problem}" if problem else None, advice)
    if not tally.total:
        return Outcome(False, "no checkpoint reached the disk (see the other checks)", {}, 0.0)
    success = f"all {tally.total} checkpoints hold the parameters and momentum of the step they name"
    return tally.outcome(success, score=True)


# ---- one-in-flight and wait: which checkpoints are on disk after wait() ------------------------------------

IN_FLIGHT = (
    "When save() is called while the previous write is still in flight, wait for that write first, then copy"
    " the state and start the next one (at most one save in flight: each holds a whole copy of the state)."
)
WAIT = (
    "wait() must block until the write in flight is done (join the background thread): the process may exit"
    " as soon as wait() returns."
)


def _missing(g: GroupRun, i: int, r: int, step: int) -> tuple[str, str]:
    """Why step-<step>.pt is missing, as far as the storage's report (quoted) and the rank's end tell; advice."""
    report = _report(g, i, r)
    dropped = str((report.get("dropped") or {}).get(str(step), ""))
    if dropped.startswith("wait()"):
        return f"the storage dropped its write: {dropped}", WAIT
    if dropped:
        return f"the storage dropped its write: {dropped}", IN_FLIGHT
    if step in (report.get("never_written") or []):
        return f"save(step={step}) never called write() for it", ""
    if step in (report.get("written") or []):
        return "write() finished it, but no file was left under that name", ""
    why = _error(g, i, r)
    if not why:
        return "no write of it reached the disk", ""
    # Only the rank's own error is left to tell (quoted): a write the storage dropped, re-raised by the code.
    advice = (WAIT if "wait() returned" in why else IN_FLIGHT) if "CheckpointDropped" in why else ""
    errored = any(e.get("call") == i for e in g.ranks[r].errors)
    return (f"the run ended with {why}" if errored else why), advice


def wait_rule(facts: Facts) -> Outcome:
    tally = tallies.Tally(unit="rank", empty="no run could be judged")
    for g, i, case in _saving(facts):
        last = case.expected[0]["saved"][-1]
        for r in range(g.world_size):
            if last in _checkpoints(g, case, r):
                tally.add(None)
                continue
            why, advice = _missing(g, i, r, last)
            tally.add(f"{_where(g, case, r)}: step-{last}.pt, the last checkpoint, is not on disk ({why})", advice)
    return tally.outcome("every run's last checkpoint was on disk when wait() returned", score=True)


def one_in_flight(facts: Facts) -> Outcome:
    tally = tallies.Tally(unit="rank", empty="no run could be judged")
    for g, i, case in _saving(facts):
        earlier = case.expected[0]["saved"][:-1]
        for r in range(g.world_size):
            have = _checkpoints(g, case, r)
            gone = [s for s in earlier if s not in have]
            if not gone:
                tally.add(None)
                continue
            why, advice = _missing(g, i, r, gone[0])
            more = f" (and {', '.join(f'step-{s}.pt' for s in gone[1:])})" if gone[1:] else ""
            tally.add(f"{_where(g, case, r)}: step-{gone[0]}.pt is not on disk ({why}){more}", advice)
    return tally.outcome("every checkpoint before the last was on disk: no write was dropped", score=True)


# ---- crash-safe: after a crash in the middle of a write -----------------------------------------------------

ATOMIC = (
    "write() is not atomic. Write each checkpoint to a temporary name in the same folder (one that does not"
    " match step-<n>.pt), then os.replace() it to step-<n>.pt once write() has returned: that name then always"
    " stands for a complete file, and after a crash the newest checkpoint is the previous one."
)


def crash_safe(facts: Facts) -> Outcome:
    tally = tallies.Tally(unit="run", empty="the run with a crash was not run")
    for g, i, case in _runs(facts, "crash"):
        crash_at, every = int(case.inputs[0]["crash_at"]), int(case.inputs[0]["every"])
        for r in range(g.world_size):
            problem, advice = _crash_problem(g, i, case, r, crash_at, crash_at - every)
            tally.add(problem, advice)
    return tally.outcome("after the crash the newest checkpoint was the previous one, whole", score=True)


def _crash_problem(g: GroupRun, i: int, case: Case, r: int, crash_at: int, previous: int) -> tuple[str | None, str]:
    where = _where(g, case, r)
    if g.status is None:
        return f"{where}: not run: an earlier group ended the grading", ""
    if result(g, i, r) is not None:
        report = _report(g, i, r)
        said = "" if crash_at in (report.get("saved") or []) else f": save(step={crash_at}) was never called"
        if crash_at in (report.get("never_written") or []):
            said = f": save(step={crash_at}) never called write() (checkpoints go to disk through write() only)"
        return f"{where}: the crash never came: the run finished without a write of step {crash_at}{said}", ""
    files = _checkpoints(g, case, r)
    error = next((e for e in g.ranks[r].errors if e.get("call") == i), None)
    if not files:
        said = f" (the run ended early: {error.get('error')}: {str(error.get('message'))[:300]})" if error else ""
        return f"{where}: no checkpoint was on disk after the crash{said}", ""
    newest = max(files)
    data = files[newest]
    size = g.file_sizes.get(f"{case.inputs[0]['folder']}/rank-{r}/step-{newest}.pt", 0)
    if newest > previous:
        if data is not None and archive_state(data) != "torn":  # every byte there, whatever its tensors held
            return (
                f"{where}: step-{newest}.pt is a whole archive although the process crashed in the middle of"
                " writing it: it was not written through write()",
                "",
            )
        return (
            f"{where}: step-{newest}.pt, the newest checkpoint after the crash, is half-written ({size:,} bytes: the"
            f" crash came in the middle of its write). A resume loads the newest checkpoint, and this one is torn;"
            f" step-{previous}.pt was the one to resume from",
            ATOMIC,
        )
    if newest < previous:
        return (
            f"{where}: step-{previous}.pt, complete before the crash began, is not on disk: the newest checkpoint"
            f" is step-{newest}.pt",
            "",
        )
    if data is None or archive_state(data) == "torn":
        return f"{where}: step-{previous}.pt, the newest checkpoint after the crash, is not a whole archive", ""
    return None, ""


# ---- non-blocking: the held run ends -----------------------------------------------------------------------

RETURN_AT_ONCE = (
    "save() must return as soon as the copy is taken and its write started in the background: no join of the"
    " thread it has just started. Wait for a write only in the next save() or in wait()."
)


def non_blocking(facts: Facts) -> Outcome:
    tally = tallies.Tally(unit="rank", empty="the held run was not run")
    # The strict storage releases a write whose save waits for it; the held one never does. A run that hangs
    # only with the held storage hangs in a save waiting for its own write.
    strict_ended = any(not _hung(g, i) for g, i, _ in _runs(facts, "strict"))
    for g, i, case in _runs(facts, "held"):
        for r in range(g.world_size):
            where = _where(g, case, r)
            if _hung(g, i) and not _checkpoints(g, case, r):
                hung = (
                    f"{where}: the run hung ({str(g.status).replace('_', ' ')}) before any checkpoint reached the disk"
                )
                if strict_ended:
                    hung += (
                        ", where the strict run went on: this storage never finishes a write while the loop is"
                        " still inside the save that started it, so save() waits for its own write"
                    )
                tally.add(hung, RETURN_AT_ONCE if strict_ended else "")
            elif _hung(g, i):
                tally.add(f"{where}: the run hung ({str(g.status).replace('_', ' ')}) after its first checkpoints")
            elif (unmarked := _unmarked(g, case, r)) is not None:
                tally.add(
                    f"{where}: step-{unmarked}.pt was not written through write() (it lacks the storage's mark), so"
                    " the held storage never ran it and nothing shows that save() returned before its write ended",
                    "Write every checkpoint with the write(state, path) you were given, from the background thread.",
                )
            elif not _checkpoints(g, case, r):
                why = _error(g, i, r)
                tally.add(
                    f"{where}: no checkpoint of the held run reached the disk, so nothing shows that save()"
                    " returned before its write ended" + (f" (the run ended early: {why})" if why else "")
                )
            else:
                tally.add(None)
    return tally.outcome("every save() returned while its write was held: the held run finished", score=True)


def _unmarked(g: GroupRun, case: Case, rank: int) -> int | None:
    """The first checkpoint of the run that does not hold the run's storage mark (None: all do, or none exists)."""
    mark = case.inputs[0]["mark"]
    for step, data in sorted(_checkpoints(g, case, rank).items()):
        if data is None or not scan.locate({"file": data}, {"mark": mark}, 0.0, 0.0)["mark"]:
            return step
    return None


RULES = {
    "snapshot": snapshot,
    "non-blocking": non_blocking,
    "one-in-flight": one_in_flight,
    "wait": wait_rule,
    "crash-safe": crash_safe,
}
