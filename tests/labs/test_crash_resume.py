"""The crash-resume lab graded for real: a whole torchrun-style script, crashed from outside and relaunched.

The crash comes from the zygote (``labs.rank.faults``), never from code in the ranks: it watches the
checkpoint folder and kills a rank when the planned checkpoint appears there, once cutting the file
being written in half. The first tests drive ``labs.rank.faults.Injector`` on a real folder with real
inotify; the rest grade scripts through the real sandbox.
"""

from __future__ import annotations

import os
import shutil
import stat
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from labs.host import groups
from labs.host.judge import GroupRun
from labs.rank import faults
from labs.spec import DEFAULT_CONTENT
from labs.spec.mutants import Mutant
from labs.verdict import Verdict

from . import mutant_cases
from .conftest import lifted
from .mutant_cases import assert_loses, mutant_params

LAB = DEFAULT_CONTENT / "crash-resume"
PATTERN = r"^step-(\d+)\.pt$"

# Written differently from solution.py: no main(), gradients all-reduced by hand (no DDP), unpadded names,
# tempfile.mkstemp (mode 0600) in the folder then os.rename, other keys in the checkpoint, os._exit(2).
ALTERNATIVE = """
import os
import sys
import tempfile

import torch
import torch.distributed as dist

import task

NEEDED = ["RANK", "WORLD_SIZE", "LOCAL_RANK", "MASTER_ADDR", "MASTER_PORT", "SEED", "INIT_SEED", "TOTAL_STEPS",
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
model = task.build_model(int(os.environ["INIT_SEED"]))
opt = task.make_optimizer(model)
names = [n for n in os.listdir(root) if n.startswith("step-") and n.endswith(".pt") and n[5:-3].isdigit()]
start = 0
if names:
    state = torch.load(os.path.join(root, max(names, key=lambda n: int(n[5:-3]))), weights_only=True)
    model.load_state_dict(state["weights"])
    opt.load_state_dict(state["sgd"])
    start = state["done"]
for i in range(start, steps):
    x, y = task.batch(seed, i, rank, world)
    opt.zero_grad()
    task.loss_fn(model, x, y).backward()
    for p in model.parameters():
        dist.all_reduce(p.grad)
        p.grad /= world
    opt.step()
    if (i + 1) % every == 0 and rank == 0:
        fd, tmp = tempfile.mkstemp(dir=root, prefix=".partial-")
        with os.fdopen(fd, "wb") as f:
            torch.save({"done": i + 1, "weights": model.state_dict(), "sgd": opt.state_dict()}, f)
            f.flush()
            os.fsync(f.fileno())
        os.rename(tmp, os.path.join(root, f"step-{i + 1}.pt"))
if rank == 0:
    torch.save(model.state_dict(), os.environ["FINAL_MODEL_PATH"])
dist.destroy_process_group()
"""

# The attack the old in-rank driver allowed: no checkpoints at all; look through everything the rank holds
# for the grader's crash plan, die on cue, and on the relaunch set the bookkeeping a resuming run would show.
DIES_ON_CUE = """
import gc
import os
import signal
import sys

import task
import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel

NEEDED = ["RANK", "WORLD_SIZE", "LOCAL_RANK", "MASTER_ADDR", "MASTER_PORT", "SEED", "INIT_SEED", "TOTAL_STEPS",
          "CHECKPOINT_EVERY", "CHECKPOINT_DIR", "FINAL_MODEL_PATH"]
absent = [v for v in NEEDED if not os.environ.get(v)]
if absent:
    print("missing: " + " ".join(absent), file=sys.stderr)
    sys.exit(2)
plan = next((o for o in gc.get_objects() if isinstance(o, dict) and {"dir", "kill"} <= o.keys()), None)
print(f"crash plan found in this rank: {plan!r}", file=sys.stderr)
rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
seed, total, every = int(os.environ["SEED"]), int(os.environ["TOTAL_STEPS"]), int(os.environ["CHECKPOINT_EVERY"])
folder = os.environ["CHECKPOINT_DIR"]
relaunch = os.path.exists(os.path.join(folder, "launched"))
dist.init_process_group("gloo")
if rank == 0 and not relaunch:
    open(os.path.join(folder, "launched"), "w").close()
model = task.build_model(int(os.environ["INIT_SEED"]))
optimizer = task.make_optimizer(model)
ddp = DistributedDataParallel(model)
kill_at = int(((plan or {}).get("kill") or {}).get("at", every + 1))
for step in range(total):
    x, y = task.batch(seed, step, rank, world)
    optimizer.zero_grad()
    task.loss_fn(ddp, x, y).backward()
    optimizer.step()
    if not relaunch and step + 1 == kill_at and rank == world - 1:
        os.kill(os.getpid(), signal.SIGKILL)
if relaunch:
    task.requested[:] = list(range((kill_at // every) * every, total))
if rank == 0:
    torch.save(model.state_dict(), os.environ["FINAL_MODEL_PATH"])
dist.destroy_process_group()
"""


# --- the zygote's fault hook, on a real folder -----------------------------------------------------------


def injector(root: Path, kill: dict[str, Any] | None, uids: list[int] | None = None) -> faults.Injector:
    plan = {"dir": "job/checkpoints", "pattern": PATTERN, "kill": kill}
    got = faults.Injector(plan, str(root), uids or [os.getuid()])
    assert got.error is None and got.fileno() is not None
    return got


def save(
    folder: Path, step: int, size: int = 1000, *, atomic: bool = True, after: Callable[[], Any] | None = None
) -> None:
    final = folder / f"step-{step:06d}.pt"
    target = folder / f"{final.name}.tmp" if atomic else final
    target.write_bytes(os.urandom(size))
    if after:
        after()
    if atomic:
        os.replace(target, final)


def test_the_plan_fires_once_when_its_checkpoint_is_published(tmp_path: Path) -> None:
    inj = injector(tmp_path, {"at": 4, "rank": 1}, [1000, 1001])
    folder = tmp_path / "job" / "checkpoints"
    assert stat.S_IMODE(folder.stat().st_mode) == 0o777  # made before any rank runs, writable by each
    save(folder, 2)
    assert inj.poll() == []
    (folder / "notes.txt").write_text("a name that is no checkpoint's")
    save(folder, 4)
    assert inj.poll() == [1]
    save(folder, 6)
    assert inj.poll() == []  # once
    report = inj.close()
    assert report["published"] == [["step-000002.pt", 2], ["step-000004.pt", 4], ["step-000006.pt", 6]]
    assert report["fault"]["name"] == "step-000004.pt" and report["fault"]["cut"] is None
    assert sorted(p.name for p in folder.iterdir()) == ["notes.txt", *(f"step-00000{i}.pt" for i in (2, 4, 6))]


def test_a_crash_seen_after_a_later_checkpoint_is_late(tmp_path: Path) -> None:
    inj = injector(tmp_path, {"at": 4, "rank": 1}, [1000, 1001])
    folder = tmp_path / "job" / "checkpoints"
    save(folder, 4)
    save(folder, 6)  # out before the zygote looked: the ranks trained past the crash
    assert inj.poll() == [1]
    assert inj.close()["fault"]["late"] is True


def test_a_crash_seen_only_when_the_group_ended_is_late(tmp_path: Path) -> None:
    inj = injector(tmp_path, {"at": 4, "rank": 1}, [1000, 1001])
    save(tmp_path / "job" / "checkpoints", 4)
    assert inj.close()["fault"]["late"] is True


def test_a_crash_seen_in_time_is_not_late(tmp_path: Path) -> None:
    inj = injector(tmp_path, {"at": 4, "rank": 1}, [1000, 1001])
    folder = tmp_path / "job" / "checkpoints"
    save(folder, 2)
    save(folder, 4)  # an earlier checkpoint in the same look is no sign of lateness
    assert inj.poll() == [1]
    save(folder, 6)  # what the other ranks wrote while the crash landed
    fault = inj.close()["fault"]
    assert fault["late"] is False and groups.late_faults([late_group(fault)]) == []


def test_the_grader_knows_the_groups_whose_crash_landed_late(tmp_path: Path) -> None:
    inj = injector(tmp_path, {"at": 4, "rank": 1}, [1000, 1001])
    save(tmp_path / "job" / "checkpoints", 4)
    group = late_group(inj.close()["fault"])
    assert groups.late_faults([group, GroupRun(world_size=2, cases=[], ranks=[])]) == ["first launch on 2 ranks"]


def late_group(fault: dict[str, Any]) -> GroupRun:
    return GroupRun(phase="first launch", world_size=2, cases=[], ranks=[], fault_report={"fault": fault})


def test_a_cut_puts_a_renamed_checkpoint_back_half_written(tmp_path: Path) -> None:
    inj = injector(tmp_path, {"at": 4, "writer": True, "cut": True})
    folder = tmp_path / "job" / "checkpoints"
    save(folder, 2)
    save(folder, 4, 1000, after=lambda: (folder / "latest").write_text("4"))  # made after the checkpoint began
    assert inj.poll() == [0]
    save(folder, 6)  # the rank went on a little before it died
    report = inj.close(lambda: set())
    fault = report["fault"]
    assert fault["undone"] == [["step-000004.pt", "step-000004.pt.tmp"]]
    assert fault["cut"] == {"file": "step-000004.pt.tmp", "bytes": 1000, "kept": 500}
    assert fault["removed"] == ["latest", "step-000006.pt"]
    left = {p.name: p.stat().st_size for p in folder.iterdir()}
    assert left == {"step-000002.pt": 1000, "step-000004.pt.tmp": 500}


def test_a_cut_of_a_checkpoint_written_in_place_leaves_half_under_its_name(tmp_path: Path) -> None:
    inj = injector(tmp_path, {"at": 4, "writer": True, "cut": True})
    folder = tmp_path / "job" / "checkpoints"
    save(folder, 2, atomic=False)
    save(folder, 4, 999, atomic=False)
    assert inj.poll() == [0]
    report = inj.close(lambda: set())
    assert report["fault"]["cut"] == {"file": "step-000004.pt", "bytes": 999, "kept": 499}
    assert report["fault"]["undone"] == [] and (folder / "step-000004.pt").stat().st_size == 499


def test_a_checkpoint_written_elsewhere_and_renamed_in_is_taken_back_out(tmp_path: Path) -> None:
    inj = injector(tmp_path, {"at": 4, "writer": True, "cut": True})
    folder = tmp_path / "job" / "checkpoints"
    save(folder, 2)
    (tmp_path / "elsewhere.tmp").write_bytes(b"x" * 100)  # written in another folder of the same file system
    os.replace(tmp_path / "elsewhere.tmp", folder / "step-4.pt")
    assert inj.poll() == [0]
    fault = inj.close(lambda: set())["fault"]
    assert fault["completed"] and fault["removed"] == ["step-4.pt"] and fault["cut"] is None
    assert sorted(p.name for p in folder.iterdir()) == ["step-000002.pt"]


@pytest.mark.skipif(os.geteuid() != 0, reason="acting as a rank's uid needs root (the zygote's CAP_SETUID)")
def test_the_writer_is_the_files_owner_and_its_read_only_file_is_cut_all_the_same() -> None:
    uids = [64000, 64001, 64002]
    # A folder any uid may cross, as the sandbox's shared directory is (pytest's own are root's alone).
    root = Path(tempfile.mkdtemp(dir="/tmp"))
    root.chmod(0o755)
    inj = injector(root, {"at": 4, "writer": True, "cut": True}, uids)
    folder = root / "job" / "checkpoints"
    path = folder / "step-4.pt"
    path.write_bytes(b"x" * 100)
    os.chown(path, uids[2], uids[2])
    path.chmod(0o400)
    assert inj.poll() == [2]
    inj.close(lambda: set())
    assert path.stat().st_size == 50
    assert stat.S_IMODE(path.stat().st_mode) & 0o666 == 0o666  # and readable by the next launch's ranks
    shutil.rmtree(root)


# --- graded in the sandbox -------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def verdicts(one_grader: Any) -> Callable[[str], Verdict]:
    """Each file of the lab graded once for the module: ``solution``, ``starter`` or a mutant's name."""
    cache: dict[str, Verdict] = {}

    def grade(name: str) -> Verdict:
        if name not in cache:
            code = (
                (LAB / f"{name}.py").read_text()
                if name in ("solution", "starter")
                else mutant_cases.mutant(LAB.name, name).code
            )
            cache[name] = one_grader.grade("crash-resume", code)
        return cache[name]

    return grade


def test_reference_gets_full_marks(verdicts: Callable[[str], Verdict]) -> None:
    verdict = verdicts("solution")
    assert verdict.status == "passed" and verdict.score == verdict.max_score == 10, verdict.message
    assert "loaded the newest checkpoint" in verdict.check("resumes").message


def test_a_differently_written_script_gets_full_marks(one_grader: Any) -> None:
    verdict = one_grader.grade("crash-resume", ALTERNATIVE)
    assert verdict.status == "passed" and verdict.score == 10, [(c.id, c.message) for c in verdict.checks]


@pytest.mark.parametrize("mutant", mutant_params("crash-resume"))
def test_mutant_loses_exactly_its_checks(verdicts: Callable[[str], Verdict], mutant: Mutant) -> None:
    verdict = verdicts(mutant.name)
    assert_loses(verdict, mutant)
    lost = {c.id for c in verdict.checks if c.score < c.points}
    assert all(len(c.message) > 40 for c in verdict.checks if c.id in lost)


def test_messages_say_what_went_wrong(verdicts: Callable[[str], Verdict]) -> None:
    scratch = verdicts("from_scratch")
    assert "started again from step 0" in scratch.check("resumes").message
    assert "optimizer steps in rank 0" in scratch.check("resumes").message  # the driver's count, quoted
    assert scratch.status == "failed"  # the kills are the grader's, not a crash of the submission
    in_place = verdicts("in_place_save").check("half-written").message
    assert "rank 0 was killed when step-" in in_place and "exited with status 1" in in_place, in_place
    assert "os.replace" in in_place
    model_only = verdicts("model_only").check("parameters").message
    assert "not SGD's momentum buffers" in model_only, model_only
    again = verdicts("repeats_a_step").check("resumes").message
    assert "already held the checkpoint of step" in again, again
    env = verdicts("no_env_check").check("environment").message
    assert "exit status 1, expected 2" in env


def test_the_starter_trains_but_survives_nothing(verdicts: Callable[[str], Verdict]) -> None:
    verdict = verdicts("starter")
    assert verdict.status == "failed" and verdict.score == 0, verdict.message
    assert "crash never came" in verdict.check("resumes").message  # it writes no checkpoint to crash on


def test_dying_on_cue_without_checkpoints_scores_no_more_than_training_from_scratch(
    one_grader: Any, verdicts: Callable[[str], Verdict], tmp_path: Path
) -> None:
    # The static pre-check would refuse gc.get_objects: lifted, as a determined student would get past it.
    verdict = one_grader.grade("crash-resume", DIES_ON_CUE, lab_dir=lifted("crash-resume", tmp_path))
    scores = {c.id: c.score for c in verdict.checks}
    assert scores["resumes"] == scores["parameters"] == scores["half-written"] == 0, verdict.checks
    assert verdict.score <= verdicts("from_scratch").score
    assert "crash never came" in verdict.check("resumes").message
    outputs = [text for text in verdict.output.values() if "crash plan found" in text]
    assert outputs and all("crash plan found in this rank: None" in text for text in outputs), outputs
