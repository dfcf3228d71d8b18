"""The crash-resume lab graded for real: a whole torchrun-style script, killed and relaunched."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from labs import template
from labs.spec import DEFAULT_CONTENT

LAB = DEFAULT_CONTENT / "crash-resume"
LOSES = {
    "from_scratch": {"resumes", "half-written"},  # the final parameters are right all the same
    "in_place_save": {"half-written", "parameters"},
    "local_rank_as_rank": {"resumes", "parameters", "half-written"},
    "model_only": {"parameters"},
    "no_env_check": {"environment"},
    "repeats_a_step": {"resumes", "parameters", "half-written"},
}

# Written differently from solution.py: no main(), gradients all-reduced by hand (no DDP), one folder
# per checkpoint made whole by a "complete" marker written last, os._exit(2) for missing variables.
ALTERNATIVE = """
import os
import sys

import torch
import torch.distributed as dist

import task

NEEDED = ["RANK", "WORLD_SIZE", "LOCAL_RANK", "MASTER_ADDR", "MASTER_PORT", "SEED", "TOTAL_STEPS",
          "CHECKPOINT_EVERY", "CHECKPOINT_DIR", "FINAL_MODEL_PATH"]
absent = [v for v in NEEDED if v not in os.environ]
if absent:
    sys.stderr.write("cannot start, not launched by torchrun? missing: " + " ".join(absent) + "\\n")
    sys.stderr.flush()
    os._exit(2)

rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
seed, steps, every = int(os.environ["SEED"]), int(os.environ["TOTAL_STEPS"]), int(os.environ["CHECKPOINT_EVERY"])
root = os.environ["CHECKPOINT_DIR"]
dist.init_process_group(backend="gloo", init_method="env://")
model = task.build_model(seed)
opt = task.make_optimizer(model)
done = sorted(int(d) for d in os.listdir(root) if os.path.exists(os.path.join(root, d, "COMPLETE")))
start = 0
if done:
    start = done[-1]
    model.load_state_dict(torch.load(os.path.join(root, str(start), "model.pt"), weights_only=True))
    opt.load_state_dict(torch.load(os.path.join(root, str(start), "optim.pt"), weights_only=True))
for i in range(start, steps):
    x, y = task.batch(seed, i, rank, world)
    opt.zero_grad()
    task.loss_fn(model, x, y).backward()
    for p in model.parameters():
        dist.all_reduce(p.grad)
        p.grad /= world
    opt.step()
    if (i + 1) % every == 0 and rank == 0:
        folder = os.path.join(root, str(i + 1))
        os.makedirs(folder, exist_ok=True)
        torch.save(model.state_dict(), os.path.join(folder, "model.pt"))
        torch.save(opt.state_dict(), os.path.join(folder, "optim.pt"))
        with open(os.path.join(folder, "COMPLETE"), "w") as f:
            f.write("ok")
            f.flush()
            os.fsync(f.fileno())
if rank == 0:
    torch.save(model.state_dict(), os.environ["FINAL_MODEL_PATH"])
dist.destroy_process_group()
"""


@pytest.fixture(scope="module")
def crash_grader() -> Iterator[object]:
    from labs.grader import Grader

    g = Grader(DEFAULT_CONTENT, pool_size=2, fork_from_template=template.available())
    yield g
    g.close()


def test_reference_gets_full_marks(crash_grader) -> None:
    verdict = crash_grader.grade("crash-resume", (LAB / "solution.py").read_text())
    assert verdict.status == "passed" and verdict.score == verdict.max_score == 10, verdict.message
    assert "resumed from the latest checkpoint" in verdict.check("resumes").message


def test_a_differently_written_script_gets_full_marks(crash_grader) -> None:
    verdict = crash_grader.grade("crash-resume", ALTERNATIVE)
    assert verdict.status == "passed" and verdict.score == 10, [(c.id, c.message) for c in verdict.checks]


@pytest.mark.parametrize("mutant", sorted(LOSES))
def test_mutant_loses_exactly_its_checks(crash_grader, mutant: str) -> None:
    verdict = crash_grader.grade("crash-resume", (LAB / "mutants" / f"{mutant}.py").read_text())
    lost = {c.id for c in verdict.checks if c.score < c.points}
    assert lost == LOSES[mutant], [(c.id, c.score, c.message) for c in verdict.checks]
    assert all(len(c.message) > 40 for c in verdict.checks if c.id in lost)


def test_messages_say_what_went_wrong(crash_grader) -> None:
    scratch = crash_grader.grade("crash-resume", (LAB / "mutants" / "from_scratch.py").read_text())
    assert "started again from step 0" in scratch.check("resumes").message
    assert scratch.status == "failed"  # the kills are the lab's, not a crash of the submission
    in_place = crash_grader.grade("crash-resume", (LAB / "mutants" / "in_place_save.py").read_text())
    message = in_place.check("half-written").message
    assert "exited with status 1" in message and "os.replace" in message, message
    env = crash_grader.grade("crash-resume", (LAB / "mutants" / "no_env_check.py").read_text())
    assert "exit status 1, expected 2" in env.check("environment").message


def test_the_starter_trains_but_survives_nothing(crash_grader) -> None:
    verdict = crash_grader.grade("crash-resume", (LAB / "starter.py").read_text())
    assert verdict.status == "failed" and verdict.check("parameters").passed, verdict.message
    assert not verdict.check("resumes").passed and not verdict.check("environment").passed
