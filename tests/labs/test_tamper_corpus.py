"""The tamper corpus: submissions that cheat as a skilled student would, each graded for real.

Every attack imitates an honest wrong solution (a mutant of the lab, its starter, or a former mutant
kept in ``tests/labs/tamper/<lab>/honest_*.py``) and adds a way of cheating, the code of which is in
``tests/labs/tamper/<lab>/``:

1. rewriting the public driver in the rank (one of its functions, the whole module in ``sys.modules``,
   the torch machinery it measures with) or keeping state where its walker does not look;
2. forging messages to the zygote on the rank's own control socket;
3. reading the fault plan (or another rank's part of the inputs) and acting on cue;
4. exchanging data where the wire is not counted (the group's store, files, other sockets), with a
   ring's worth of zeros for the kernel's counters, or files that look right by their sizes;
5. exhausting resources (processes, shared memory, inodes, the results channel, the kernel keyring).

An attack must score no more, check by check, than the honest solution it imitates, graded with the
same seed: points come only from results compared outside the sandbox and from what the trusted side
observes from outside the ranks. A forged message must end the rank with a problem, never be taken
for the grader's own fault. The static pre-check (``labs.spec.precheck``) would refuse many of these before
they run, but no guarantee may rest on it (code built at run time gets past any static check): the
attacks are graded with its refusal set aside (``UncheckedGrader``), and
``test_the_precheck_refuses_code_that_reaches_into_the_grader`` checks on its own that it does refuse
the ones it names.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from labs.host import template
from labs.host.grader import Grader
from labs.spec import DEFAULT_CONTENT
from labs.verdict import Verdict

from .mutant_cases import lab_mutants

TAMPER = Path(__file__).resolve().parent / "tamper"
SEED = 20_240_611  # the same inputs for an attack and the honest solution it imitates
CONTAINED = ("failed", "runtime_error", "crashed", "time_limit", "deadlock", "memory_limit")


class UncheckedGrader(Grader):
    """A real Grader whose static pre-check refuses nothing.

    Only the pre-check's own verdict (``not_allowed``) is set aside: an unusable grader, code that is
    too long or does not parse still stop here. What an attack gets is then decided by the sandbox and
    the judge alone, as it must be for code that slips past the pre-check.
    """

    def _precheck(self, lab: Any, code: str) -> Verdict | None:
        verdict = super()._precheck(lab, code)
        return None if verdict is not None and verdict.status == "not_allowed" else verdict


@dataclass(frozen=True)
class Attack:
    lab: str
    name: str  # tests/labs/tamper/<lab>/<name>.py
    honest: str  # what it imitates: the lab's "starter" or "mutants/<file>.diff", or "honest_<file>.py" here
    world_sizes: tuple[int, ...]
    placed: str = "after"  # the tamper code goes "after" the honest code, "before" it (a script), or "alone"
    refused: bool = False  # the static pre-check refuses it (frames, gc, ctypes, the driver changed...)
    statuses: tuple[str, ...] = CONTAINED  # the statuses the verdict may have
    says: str = ""  # what its message must say (the student is told what stopped the code)
    time_limit_s: float | None = None  # a shorter limit, for an attack that can only end at the limit

    def __str__(self) -> str:
        return f"{self.lab}/{self.name}"

    def code(self) -> str:
        tamper = (TAMPER / self.lab / f"{self.name}.py").read_text()
        if self.placed == "alone":
            return tamper
        honest = source(self.lab, self.honest)
        return f"{honest}\n\n{tamper}" if self.placed == "after" else f"{tamper}\n\n{honest}"


def source(lab: str, what: str) -> str:
    """The lab's starter, solution or mutant; ``honest_*`` names an honest solution kept in this corpus
    (one its lab no longer ships as a mutant)."""
    folder = TAMPER / lab if what.startswith("honest_") else DEFAULT_CONTENT / lab
    if what.startswith("mutants/"):
        found = lab_mutants(lab).get(Path(what).stem)
        if found is None:
            pytest.fail(
                f"{lab}: {what}, the honest solution this attack imitates, is gone: pick the one it imitates now"
            )
        return found.code
    path = folder / (what if what.endswith(".py") else f"{what}.py")
    if not path.is_file():
        pytest.fail(
            f"{lab}: {path.name}, the honest solution this attack imitates, is gone: pick the one it imitates now"
        )
    return path.read_text()


ATTACKS = [
    # 1. The public driver rewritten in the rank, or state kept where the driver does not look.
    Attack("zero-1", "driver_module_swapped", "mutants/full_state_every_rank.diff", (2,), refused=True),
    Attack("zero-1", "state_hidden_from_walker", "mutants/full_state_every_rank.diff", (2,)),
    Attack("activation-checkpointing", "driver_run_unmeasured", "mutants/no_checkpointing.diff", (1,), refused=True),
    Attack("activation-checkpointing", "dispatch_mode_escaped", "mutants/no_checkpointing.diff", (1,)),
    Attack("tiled-attention", "live_bytes_blinded", "mutants/full_matrix.diff", (1,), refused=True),
    Attack("tiled-attention", "numpy_matrix", "mutants/full_matrix.diff", (1,), placed="alone"),
    Attack("fsdp-wrapping", "probe_forged", "mutants/whole_model_everywhere.diff", (2,), refused=True),
    Attack("pipeline-gpipe", "events_reordered", "honest_sequential_micro_batches.py", (2,)),
    Attack("loss-scaling", "step_counter_bypassed", "mutants/steps_on_overflow.diff", (2,)),
    Attack("distributed-sampler", "passes_replayed", "mutants/generator_in_init.diff", (2,), refused=True),
    Attack("crash-resume", "steps_hidden_from_counter", "mutants/from_scratch.diff", (2,), "before", refused=True),
    Attack("ring-allreduce", "counters_unwrapped", "mutants/builtin_all_reduce.diff", (3,), refused=True),
    Attack(
        "ring-allreduce", "builtin_through_functional_collectives", "mutants/builtin_all_reduce.diff", (3,), "alone"
    ),
    Attack("ddp-from-scratch", "driver_swapped_for_reference", "starter", (2,), refused=True),
    Attack("grad-accumulation", "driver_swapped_for_reference", "starter", (2,), refused=True),
    Attack("fsdp-mixed-precision", "driver_swapped_for_emulation", "starter", (2,), refused=True),
    # 3. The fault plan, or another rank's inputs, read in the rank.
    Attack("crash-resume", "plan_from_optimizer_hooks", "mutants/in_place_save.diff", (2,), "before"),
    Attack("crash-resume", "plan_from_frames", "mutants/in_place_save.diff", (2,), "before", refused=True),
    Attack("loss-scaling", "plan_read_from_driver", "mutants/local_overflow.diff", (2,), refused=True),
    Attack("param-sync", "plan_read_from_driver", "mutants/allclose_fingerprint.diff", (2,), refused=True),
    Attack("debugging-tools", "plan_read_from_driver", "mutants/allclose_losses.diff", (2,), refused=True),
    # 4. Data exchanged where the wire is not counted; files that look right by their sizes.
    Attack("ring-allreduce", "star_through_the_store", "mutants/through_rank_zero.diff", (3,), "alone"),
    Attack("ring-allreduce", "side_channels", "mutants/through_rank_zero.diff", (3,)),
    Attack("ring-allreduce", "zeros_around_the_ring", "starter", (3,), "alone"),
    Attack("param-sync", "gathered_through_the_store", "mutants/gather_parameters.diff", (2,), "alone"),
    Attack("checkpoint-resharding", "files_split_by_size", "mutants/rank0_torch_save.diff", (4, 2)),
    Attack("overlap-ddp", "one_bucket_cut_in_k", "mutants/cap_ignored.diff", (2,)),
    Attack("distributed-finetune", "overlap_copied", "honest_default_betas_no_resume.py", (2,)),
    # 5. Resources.
    Attack("ring-allreduce", "fork_bomb_beside", "mutants/averages.diff", (2,), time_limit_s=4),
    Attack("ring-allreduce", "shared_memory_bomb", "mutants/averages.diff", (2,), says="memory limit"),
    Attack("ring-allreduce", "keyring", "mutants/averages.diff", (2,), refused=True, says="SIGSYS"),
    Attack("collectives-p2p", "huge_result", "starter", (2,), "alone"),
    Attack("checkpoint-resharding", "inode_flood", "mutants/rank0_torch_save.diff", (4, 2)),
]


@pytest.fixture(scope="module")
def unchecked() -> Iterator[UncheckedGrader]:
    g = UncheckedGrader(pool_size=2, fork_from_template=template.available())
    yield g
    g.close()


@pytest.fixture(scope="module")
def honest(unchecked: UncheckedGrader) -> Callable[[Attack], Verdict]:
    """The verdict of the honest solution an attack imitates, graded once per lab, solution and sizes."""
    seen: dict[tuple[str, str, tuple[int, ...]], Verdict] = {}

    def verdict(attack: Attack) -> Verdict:
        key = (attack.lab, attack.honest, attack.world_sizes)
        if key not in seen:
            code = source(attack.lab, attack.honest)
            seen[key] = unchecked.grade(attack.lab, code, world_sizes=list(attack.world_sizes), seed=SEED)
        return seen[key]

    return verdict


def gains(attack: Verdict, honest: Verdict) -> dict[str, str]:
    """The checks on which the attack scored more than the honest solution, with both messages."""
    out = {}
    for mine in attack.checks:
        theirs = honest.check(mine.id)
        if mine.score > theirs.score:
            out[mine.id] = f"{mine.score} (honest {theirs.score}): {mine.message[:300]}"
    return out


# Known gaps, kept as strict expected failures so that closing one shows. None now: overlap-ddp's k equal slices
# of one flat buffer frame k full all-reduces on the wire, where the real buckets' last one (16 bytes) frames 1/N.
# distributed-sampler's determinism is judged from passes the driver repeats inside one rank, which a wrapper
# can replay; judging it across separate groups of ranks (no state carried between them) would close it.
KNOWN_GAPS: set[str] = set()


def _marked(attack: Attack) -> object:
    if str(attack) not in KNOWN_GAPS:
        return attack
    reason = "known gap (see KNOWN_GAPS): the attack keeps points no trusted fact can take from it yet"
    return pytest.param(attack, marks=pytest.mark.xfail(strict=True, reason=reason), id=str(attack))


@pytest.mark.parametrize("attack", [_marked(a) for a in ATTACKS], ids=str)
def test_an_attack_scores_no_more_than_the_honest_solution_it_imitates(
    unchecked: UncheckedGrader, honest: Callable[[Attack], Verdict], attack: Attack
) -> None:
    theirs = honest(attack)
    assert theirs.status in (*CONTAINED, "passed"), f"the honest {attack.honest} did not run: {theirs.message}"
    sizes = list(attack.world_sizes)
    v = unchecked.grade(attack.lab, attack.code(), world_sizes=sizes, seed=SEED, time_limit_s=attack.time_limit_s)
    gained = gains(v, theirs)
    assert not gained, f"{attack} scored {v.score}, the honest {attack.honest} {theirs.score}: gained {gained}"
    allowed = (*attack.statuses, "passed") if theirs.status == "passed" else attack.statuses
    assert v.status in allowed, f"{attack}: {v.status}: {v.message}"
    assert attack.says in v.message, f"{attack}: the message does not say {attack.says!r}: {v.message}"


# 2. Messages forged on the control socket: (lab, the function wrapped or None in a script, where the
# tamper code goes, how the socket is reached, the message).
MESSAGES = (
    "result_for_another_call",
    "second_result",
    "want_out_of_turn",
    "done_mid_call",
    "fault_after_ready",
    "forged_wire",
    "result_as_another_rank",
)
FORGED = [
    *[("ring-allreduce", "ring_all_reduce", "after", "fd", m) for m in MESSAGES],
    ("ring-allreduce", "ring_all_reduce", "after", "frames", "result_for_another_call"),
    ("ring-allreduce", "ring_all_reduce", "after", "gc", "want_out_of_turn"),
    ("ddp-from-scratch", "sync_gradients", "after", "gc", "done_mid_call"),
    ("crash-resume", None, "before", "fd", "fault_after_ready"),  # in a phase where a rank's death is expected
]


def forged(lab: str, target: str | None, placed: str, reach: str, message: str) -> str:
    settings = f"MESSAGE = {message!r}\nREACH = {reach!r}\nTARGET = {target!r}\n"
    tamper = settings + (TAMPER / "protocol.py").read_text()
    return f"{source(lab, 'solution')}\n\n{tamper}" if placed == "after" else f"{tamper}\n\n{source(lab, 'solution')}"


@pytest.mark.parametrize(("lab", "target", "placed", "reach", "message"), FORGED, ids=lambda v: str(v))
def test_a_forged_control_message_ends_the_rank_with_a_problem(
    unchecked: UncheckedGrader, lab: str, target: str | None, placed: str, reach: str, message: str
) -> None:
    v = unchecked.grade(lab, forged(lab, target, placed, reach, message), world_sizes=[2], seed=SEED)
    assert v.status in CONTAINED, f"{message} via {reach}: {v.status}: {v.message}"
    problems = [r["problem"] for group in v.data.get("ranks", {}).values() for r in group if r.get("problem")]
    assert problems, f"{message} via {reach} ended no rank: {v.status}, {v.score}/{v.max_score}: {v.message}"
    assert v.score < v.max_score


@pytest.fixture(scope="module")
def checked() -> Iterator[Grader]:
    """A Grader with its pre-check: a refusal comes before any sandbox, so none is kept warm."""
    g = Grader(pool_size=0, fork_from_template=False)
    yield g
    g.close()


REFUSED = [pytest.param(a.lab, a.code, id=str(a)) for a in ATTACKS if a.refused] + [
    pytest.param(f[0], functools.partial(forged, *f), id=f"{f[0]}/{f[3]}-{f[4]}")
    for f in FORGED
    if f[3] in ("frames", "gc")
]


@pytest.mark.parametrize(("lab", "code"), REFUSED)
def test_the_precheck_refuses_code_that_reaches_into_the_grader(
    checked: Grader, lab: str, code: Callable[[], str]
) -> None:
    v = checked.grade(lab, code(), seed=SEED)
    assert v.status == "not_allowed", f"{v.status}: {v.message}"
    assert v.message.startswith("Not allowed, so nothing was run: line ")
    assert v.score == 0
