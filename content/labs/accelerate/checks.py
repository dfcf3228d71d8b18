"""Trusted checks for accelerate: the launches, the single-process reference, the rules.

Never mounted into the sandbox. Per world size, two groups of processes on one shared folder: the
launch trains uninterrupted, saving its state with ``save_state`` after ``SAVE_AT`` steps (inside an
epoch), evaluates, and saves the model and the evaluation losses; the relaunch, new processes, loads
that state and trains to the end. On 1 process the script is started as ``python train.py`` would start
it (no torchrun variables), on 2 as ``accelerate launch --cpu`` would. The sizes, the seed, the learning
rate and ``SAVE_AT`` are drawn per grading.

What earns points is computed here, outside the processes: the parameters rank 0 saved, against one
process trained on the global batch (``reference.train``); the evaluation losses, counted and compared
with the loss of each evaluation example under the very parameters the script saved (so a training
mistake does not cost the evaluation check too); the relaunch's parameters against the same reference.
A wrong result is replayed against the mistakes ``reference`` knows, and named when one explains it.
"""

from __future__ import annotations

from dataclasses import asdict
from typing import Any

import torch

from labs.authoring import Case, Facts, GroupRun, Outcome, Phase, compare, load_public, load_trusted, result, tallies

TOLERANCE = (1e-9, 1e-11)  # float64; DDP averages the processes' gradients, one process takes the batch's mean
MATCH = 1e-6  # a replayed mistake explains a result it equals to this, relative to the largest value
BATCH, EPOCHS = 4, 2


def _draw(gen: torch.Generator, low: int, high: int) -> int:
    """An integer in [low, high], from the grade's generator."""
    return int(torch.randint(low, high + 1, (1,), generator=gen))


def _every(count: int, unit: str) -> str:
    """ "the launch", "both launches", "all 3 launches": the units a success message speaks of."""
    return f"the {unit}" if count == 1 else f"both {unit}es" if count == 2 else f"all {count} {unit}es"


def _launcher(n: int) -> str:
    return "python train.py" if n == 1 else f"accelerate launch --cpu --num_processes {n} train.py"


def phases(world_sizes: list[int], gen: torch.Generator) -> list[Phase]:
    """A launch and a relaunch per world size, each a group of its own, on one shared folder per world size."""
    task, ref = load_public(__file__, "task"), load_trusted(__file__, "reference")
    job = ref.Job(
        seed=_draw(gen, 0, 2**31 - 2),
        train_examples=BATCH * max(world_sizes) * _draw(gen, 2, 4),  # whole global batches at every world size
        eval_examples=_draw(gen, 9, 15),  # never a multiple of 2 x 4: the last batch is evened out with repeats
        batch_size=BATCH,
        epochs=EPOCHS,
        lr=_draw(gen, 5, 20) / 100,
    )
    out = []
    for n in world_sizes:
        way = ref.right(job, n)
        per_epoch = ref.steps_per_epoch(job, way)
        # Inside an epoch (the relaunch must skip batches), and two steps or more before the end (a relaunch that
        # restarts the schedule takes its first step with the optimizer's restored learning rate: right).
        inside = [s for s in range(1, per_epoch * EPOCHS - 1) if s % per_epoch]
        save_at = inside[_draw(gen, 0, len(inside) - 1)]
        env = {
            "SEED": job.seed,
            "TRAIN_EXAMPLES": job.train_examples,
            "EVAL_EXAMPLES": job.eval_examples,
            "BATCH_SIZE": job.batch_size,
            "EPOCHS": job.epochs,
            "LR": job.lr,
            "SAVE_AT": save_at,
            "CHECKPOINT_DIR": f"{{shared}}/job-{n}/checkpoint",
        }
        launcher = "python" if n == 1 else "accelerate"
        want = {"job": asdict(job), "n": n, "save_at": save_at, "params": ref.train(task, job, way)}
        launch = [{"env": env | {"RESUME": "0"}, "launcher": launcher} for _ in range(n)]
        relaunch = [{"env": env | {"RESUME": "1"}, "launcher": launcher} for _ in range(n)]
        label = f"`{_launcher(n)}`, saving its state after {save_at} of {per_epoch * EPOCHS} steps"
        parts = {"parameters": ["result"], "evaluation": ["result"]}
        first = Case("parameters", "main", label, launch, [want] * n, driver="run", parts=parts)
        again = Case("resume", "main", f"`{_launcher(n)}` again, resuming", relaunch, [want] * n, driver="run")
        out.append(Phase("launch", n, [first], shares_dir=True))
        out.append(Phase("relaunch", n, [again], shares_dir=True))
    return out


# --- what rank 0 saved ---------------------------------------------------------------------------------


def _last_line(text: str) -> str:
    lines = [line.strip() for line in str(text).splitlines() if line.strip()]
    return lines[-1][:300] if lines else "(nothing on stderr)"


def _saved(g: GroupRun) -> tuple[dict[str, Any] | None, str]:
    """Rank 0's saved result of the group's run, or None and why there is none (the first process that failed)."""
    if g.status is None:
        return None, "not run: an earlier group ended the grading"
    for r in range(g.world_size):
        got = result(g, 0, r)
        if not isinstance(got, dict):
            errors = g.ranks[r].errors
            if errors:
                return None, f"process {r}: {errors[0].get('error')}: {str(errors[0].get('message'))[:300]}"
            ended = {"deadlock": "the processes hung (deadlock)", "time_limit": "the time limit ran out"}
            return None, f"process {r} sent no result ({ended.get(str(g.status), str(g.status))})"
        if got.get("exit") != 0:
            status, said = got.get("exit"), _last_line(got.get("stderr", ""))
            return None, f"process {r}'s script exited with status {status}: {said}"
    saved = result(g, 0, 0)["result"]
    if "problem" in saved:
        return None, str(saved["problem"])
    return saved, ""


def _crash_advice(g: GroupRun, why: str) -> str:
    """Advice for a script that failed where a known mistake makes it fail."""
    if g.world_size == 1 and "env://" in why:
        return (
            "Started as `python train.py`, the process has no torchrun variables: do not call"
            " dist.init_process_group yourself. Accelerator() creates the process group when it is launched on"
            " several processes, and none on one."
        )
    return ""


def _model(saved: dict[str, Any]) -> tuple[dict[str, Any], str]:
    """The saved state_dict with DDP's ``module.`` taken off its names, and what to say if it had it."""
    model = saved["model"]
    if model and all(k.startswith("module.") for k in model):
        note = (
            "the saved state_dict's names start with 'module.': it is the DistributedDataParallel wrapper's, which"
            " a plain model cannot load. Save accelerator.get_state_dict(model) (or accelerator.unwrap_model(model)"
            ".state_dict())"
        )
        return {k.removeprefix("module."): v for k, v in model.items()}, note
    return model, ""


def _job(case: Case) -> Any:
    return load_trusted(__file__, "reference").Job(**case.expected[0]["job"])


def _params_wrong(g: GroupRun) -> str | None:
    """Why the group's saved parameters are not the reference's, or None."""
    saved, why = _saved(g)
    if saved is None:
        return why
    model, note = _model(saved)
    if note:
        return note
    found = compare({"model": g.cases[0].expected[0]["params"]}, {"model": model}, {"model": TOLERANCE})
    return f"{found} (the reference: one process trained on the global batch)" if found else None


# --- parameters ----------------------------------------------------------------------------------------


def _wrong_way(case: Case, model: dict[str, Any]) -> str:
    """The mistake in how the processes trained that explains ``model``, as advice; "" if none does."""
    task, ref = load_public(__file__, "task"), load_trusted(__file__, "reference")
    job, n = _job(case), int(case.expected[0]["n"])
    if n == 1:
        return ""
    b, per_epoch = job.batch_size, job.train_examples // (job.batch_size * n)
    written = job.train_examples // b * job.epochs  # the schedule over the DataLoader as written
    ways = [
        (
            ref.Way(b, written, 1),
            f"These are the parameters of one process training alone on every batch of {b} examples: each process"
            f" trained on the whole training set by itself. Prepare the train DataLoader (and the model) with"
            f" accelerator.prepare, so that each of the {n} processes takes its own batches and a step sees {n * b}",
        ),
        (
            ref.Way(b, written, n),
            f"Every process trained on every batch of {b} examples (the same ones everywhere), with a prepared"
            " scheduler: the train DataLoader was not prepared, so it was not split between the processes",
        ),
        (
            ref.Way(b * n, per_epoch * job.epochs, n),
            f"The learning rate fell {n} times too fast, to 0 halfway: the schedule was counted in the prepared"
            f" DataLoader's {per_epoch} batches an epoch, but a prepared scheduler steps {n} times per optimizer step"
            f" (once per process). Build it before prepare, over len(train_loader) * epochs of the DataLoader as"
            f" written ({written} steps)",
        ),
        (
            ref.Way(b * n, written, 1),
            f"The learning rate fell {n} times too slowly: the schedule counts the {written} batches of one process"
            f" (the DataLoader as written), and it stepped once per optimizer step. Prepare it with"
            f" accelerator.prepare, which steps it {n} times per optimizer step",
        ),
    ]
    for way, advice in ways:
        if ref.close(ref.train(task, job, way), model, MATCH):
            return advice + "."
    return ""


GLOBAL_BATCH = (
    "The DataLoader's batch_size is the batch of one process: on N processes an optimizer step trains on N"
    " times as many examples, and the result must equal one process trained on those global batches."
)


def parameters(facts: Facts) -> Outcome:
    tally = tallies.Tally(unit="launch", empty="no launch was run")
    for g in facts.groups:
        if g.phase != "launch":
            continue
        wrong, advice = _params_wrong(g), ""
        saved, why = _saved(g)
        if saved is None:
            advice = _crash_advice(g, why)
        elif wrong and not _model(saved)[1]:
            advice = _wrong_way(g.cases[0], saved["model"]) or GLOBAL_BATCH
        tally.add(f"{g.cases[0].label}: {wrong}" if wrong else None, advice)
    success = "ended with the parameters of one process trained on the global batch"
    return tally.outcome(f"{_every(tally.total, 'launch')} {success}", score=True)


# --- evaluation ----------------------------------------------------------------------------------------


def _count_wrong(count: int, examples: int, n: int, batch: int) -> str:
    """What a count of evaluation losses other than the set's size says about how they were gathered."""
    per_step = n * batch
    padded = -(-examples // per_step) * per_step
    said = f"the evaluation returned {count} losses for {examples} examples"
    if count == padded and n > 1:
        return (
            f"{said}: {padded - examples} of them twice. To give every process a last batch of the same size, the"
            f" prepared DataLoader repeats examples from the start of the set; accelerator.gather keeps those"
            f" repeats, accelerator.gather_for_metrics drops them"
        )
    if count == n * examples and n > 1:
        return (
            f"{said}, {n} times each: every process evaluated the whole set. Prepare the evaluation DataLoader,"
            " so that each process evaluates its share"
        )
    if count < examples and n > 1:
        return (
            f"{said}: only a share of them, as one process evaluates it. Gather every process's losses"
            " with accelerator.gather_for_metrics"
        )
    return said


def _evaluation_wrong(g: GroupRun) -> str | None:
    saved, why = _saved(g)
    if saved is None:
        return why
    case = g.cases[0]
    job, n = _job(case), g.world_size
    losses = saved["eval_losses"]
    if losses.dim() != 1:
        return f"eval_losses has shape {tuple(losses.shape)}: save one loss per example, a 1-D tensor"
    if losses.numel() != job.eval_examples:
        return _count_wrong(losses.numel(), job.eval_examples, n, job.batch_size)
    model, _ = _model(saved)
    want = load_trusted(__file__, "reference").eval_losses(load_public(__file__, "task"), job, model)
    if want is None:
        return "the saved model does not fit the MLP (names or shapes), so its losses cannot be checked"
    # Each example once, in any order: the losses are compared sorted.
    found = compare({"eval_losses": torch.sort(want).values}, {"eval_losses": torch.sort(losses).values})
    if found:
        return (
            f"sorted, {found}: the losses are not those of the saved model on the {job.eval_examples} evaluation"
            " examples (task.example_losses of the model after training, in eval mode, under torch.no_grad())"
        )
    return None


def evaluation(facts: Facts) -> Outcome:
    tally = tallies.Tally(unit="launch", empty="no launch was run")
    for g in facts.groups:
        if g.phase == "launch":
            wrong = _evaluation_wrong(g)
            tally.add(f"{g.cases[0].label}: {wrong}" if wrong else None, _crash_advice(g, wrong or ""))
    success = "evaluated every example exactly once, with the loss the saved model gives it"
    return tally.outcome(f"{_every(tally.total, 'launch')} {success}", score=True)


# --- resume --------------------------------------------------------------------------------------------

RESUMES: list[tuple[dict[str, Any], str]] = [
    (
        {"model": False, "optimizer": False, "scheduler": False},
        "The relaunch trained from the initial weights: it did not restore the saved state. Call"
        " accelerator.load_state(checkpoint_dir) after accelerator.prepare",
    ),
    (
        {"optimizer": False, "scheduler": False},
        "The relaunch restored the model's weights only: SGD's momentum and the learning-rate schedule started"
        " again from zero. accelerator.load_state restores the optimizer and the scheduler too, once they are"
        " prepared",
    ),
    (
        {"scheduler": False},
        "The learning-rate schedule started again from its first step: the scheduler was not in the saved state."
        " Prepare it with accelerator.prepare (or accelerator.register_for_checkpointing(scheduler)), so that"
        " save_state and load_state include it",
    ),
    (
        {"optimizer": False},
        "SGD's momentum started again from zero: the optimizer's state was not restored",
    ),
    (
        {"skip": "none"},
        "The relaunch trained again on the batches of its epoch that the saved state already holds. Skip them:"
        " accelerator.skip_first_batches(train_loader, steps done % len(train_loader)) for that epoch",
    ),
    (
        {"skip": "all"},
        "The relaunch trained every epoch again from the first batch: carry on from the step the saved state holds",
    ),
]


def _resume_advice(case: Case, model: dict[str, Any]) -> str:
    task, ref = load_public(__file__, "task"), load_trusted(__file__, "reference")
    job, n, at = _job(case), int(case.expected[0]["n"]), int(case.expected[0]["save_at"])
    for what, advice in RESUMES:
        if ref.close(ref.train(task, job, ref.right(job, n), ref.Resume(at=at, **what)), model, MATCH):
            return advice + "."
    return ""


def resume(facts: Facts) -> Outcome:
    tally = tallies.Tally(unit="relaunch", empty="no relaunch was run")
    for k, g in enumerate(facts.groups):
        if g.phase != "relaunch":
            continue
        where = g.cases[0].label
        wrong, advice = _params_wrong(g), ""
        if wrong:
            launch = facts.groups[k - 1]
            if _params_wrong(launch):
                wrong += (
                    "; the uninterrupted launch before it does not end with the reference's parameters either (see"
                    " the parameters check), and a relaunch can only end where its launch does: fix that first"
                )
            else:
                saved, _ = _saved(g)
                advice = _resume_advice(g.cases[0], _model(saved)[0]) if saved is not None else ""
        tally.add(f"{where}: {wrong}" if wrong else None, advice)
    success = "loaded the state saved mid-epoch and ended with the parameters of uninterrupted training"
    return tally.outcome(f"{_every(tally.total, 'relaunch')} {success}", score=True)


RULES = {
    "parameters": parameters,
    "evaluation": evaluation,
    "resume": resume,
}
