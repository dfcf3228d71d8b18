"""Every lab in content/labs is proven: its reference gets full marks, its starter fails cleanly and each of
its mutants loses exactly the checks its header names (``labs.spec.mutants``).

A lab whose own test file grades every one of its mutants (parametrised by ``mutant_cases.mutant_params``
over the same headers) is proven by that file: running the command on it here too graded each of those
mutants twice (six minutes of the suite), and on one xdist worker. The command proves the other labs here,
every mutant at its header's world sizes, and the GPU-only labs where a GPU is.
"""

from __future__ import annotations

import importlib
import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from labs.host import template
from labs.host.grader import gpu_count
from labs.host.prove import MIN_MUTANTS, prove, summary, table
from labs.spec import DEFAULT_CONTENT, load_labs, mutants
from labs.spec.mutants import Mutant

LABS = sorted(load_labs(DEFAULT_CONTENT))
REPO = Path(__file__).resolve().parents[2]
# Labs whose own test module grades each of their mutants against its header (the module, by lab).
PINNED = {
    "activation-checkpointing": "test_activation_checkpointing",
    "checkpoint-resharding": "test_checkpoint_resharding",
    "collectives-p2p": "test_lab_mutants",
    "crash-resume": "test_crash_resume",
    "debugging-tools": "test_debugging_tools",
    "distributed-sampler": "test_distributed_sampler",
    "fsdp-mixed-precision": "test_fsdp_mixed_precision",
    "fsdp-wrapping": "test_fsdp_wrapping",
    "grad-accumulation": "test_grad_accumulation",
    "lamb": "test_lamb",
    "loss-scaling": "test_loss_scaling",
    "memory-estimate": "test_memory_estimate",
    "overlap-ddp": "test_overlap_ddp",
    "param-sync": "test_param_sync",
    "pipeline-gpipe": "test_pipeline_gpipe",
    "ring-allreduce": "test_lab_mutants",
    "tiled-attention": "test_tiled_attention",
    "zero-1": "test_zero_1",
}


def graded_mutants(lab_id: str) -> set[str]:
    """The mutants of ``lab_id`` that a ``test_mutant_*`` function of its test module is parametrised over."""
    module = importlib.import_module(f"tests.labs.{PINNED[lab_id]}")
    found = set()
    for name, test in vars(module).items():
        if not name.startswith("test_mutant_"):
            continue
        for mark in getattr(test, "pytestmark", []):
            if mark.name == "parametrize":
                for value in mark.args[1]:
                    values = value.values if hasattr(value, "values") else (value,)
                    labs = {v for v in values if isinstance(v, str)} or {lab_id}
                    found |= {v.name for v in values if isinstance(v, Mutant) and lab_id in labs}
    return found


@pytest.mark.parametrize("lab_id", LABS)
def test_every_lab_has_enough_mutants_that_parse_and_apply(lab_id: str) -> None:
    lab = load_labs(DEFAULT_CONTENT)[lab_id]
    assert not list((lab.folder / "mutants").glob("*.py")), "mutants are diffs against solution.py: mutants/*.diff"
    found = mutants.load(lab)  # a header that is wrong or a diff that does not apply raises, path:line
    assert len(found) >= MIN_MUTANTS, f"{lab_id} has {len(found)} mutants"
    assert all(m.code != lab.solution_path.read_text() for m in found)
    for m in found:
        compile(m.code, str(m.path), "exec", dont_inherit=True)


@pytest.mark.parametrize("lab_id", sorted(PINNED))
def test_a_pinned_lab_grades_every_mutant_against_its_header(lab_id: str) -> None:
    lab = load_labs(DEFAULT_CONTENT)[lab_id]
    names = {m.name for m in mutants.load(lab)}
    assert graded_mutants(lab_id) == names, f"tests/labs/{PINNED[lab_id]}.py grades these mutants of {lab_id}"


@pytest.fixture(scope="module")
def catalogue_grader() -> Iterator[object]:
    from labs.host.grader import Grader

    g = Grader(DEFAULT_CONTENT, pool_size=2, fork_from_template=template.available(), gpus=gpu_count() > 0)
    yield g
    g.close()


@pytest.mark.parametrize("lab_id", [lab for lab in LABS if lab not in PINNED])
def test_lab_is_proven(catalogue_grader, lab_id: str) -> None:
    lab = load_labs(DEFAULT_CONTENT)[lab_id]
    if lab.spec.needs_gpu and gpu_count() < max(lab.spec.world_sizes):
        pytest.skip(f"{lab_id} needs a CUDA GPU ({max(lab.spec.world_sizes)}); this machine has {gpu_count()}")
    rows = prove(catalogue_grader, lab)
    result = summary(rows)
    assert result["mutants"] >= MIN_MUTANTS, f"{lab_id} has {result['mutants']} mutants"
    assert result["ok"], "\n" + table(lab, rows)
    # Every mutant's loss comes with a message a student can act on, not a bare "failed".
    for row in (r for r in rows if r.role == "mutant"):
        lost = [c for c in row.verdict.checks if c.id in row.lost]
        assert all(len(c.message) > 20 for c in lost), (row.name, [c.message for c in lost])


def test_lab_test_command_refuses_an_unproven_lab(tmp_path: Path) -> None:
    # The engine's test lab has no mutants: `ringlab lab test` prints its table and exits 1.
    shutil.copytree(Path(__file__).parent / "fixtures" / "tree-lab", tmp_path / "labs" / "tree-lab")
    env = {**os.environ, "RINGLAB_CONTENT_DIR": str(tmp_path)}
    out = subprocess.run(
        [str(Path(sys.executable).with_name("ringlab")), "lab", "test", "tree-lab", "--no-record"],
        capture_output=True, text=True, cwd=REPO, env=env, timeout=300, check=False,
    )  # fmt: skip
    assert out.returncode == 1, out.stdout + out.stderr
    assert "solution.py" in out.stdout and "passed" in out.stdout and "8/8" in out.stdout
    assert "0 mutants in mutants/" in out.stderr and "NOT PROVEN: tree-lab" in out.stderr
    missing = subprocess.run(
        [str(Path(sys.executable).with_name("ringlab")), "lab", "test", "no-such-lab"],
        capture_output=True, text=True, cwd=REPO, env=env, timeout=60, check=False,
    )  # fmt: skip
    assert missing.returncode == 2 and "no such lab: no-such-lab" in missing.stderr


def test_lab_test_command_does_not_prove_a_gpu_lab_without_a_gpu(tmp_path: Path) -> None:
    """Named, a GPU-only lab that cannot run here exits 3 (not proven, nothing found wrong); in a run of every
    lab it is listed as skipped and does not fail the run."""
    lab = tmp_path / "labs" / "tree-lab"
    shutil.copytree(Path(__file__).parent / "fixtures" / "tree-lab", lab)
    text = (lab / "lab.yaml").read_text().replace("world_sizes: [2, 3]", "world_sizes: [8]\nneeds_gpu: true")
    (lab / "lab.yaml").write_text(text)
    env = {**os.environ, "RINGLAB_CONTENT_DIR": str(tmp_path)}
    ringlab = str(Path(sys.executable).with_name("ringlab"))
    assert gpu_count() < 8, "eight GPUs here: this test's lab would run; give it a larger world size"
    named = subprocess.run(
        [ringlab, "lab", "test", "tree-lab", "--no-record"],
        capture_output=True, text=True, cwd=REPO, env=env, timeout=300, check=False,
    )  # fmt: skip
    assert named.returncode == 3, named.stdout + named.stderr
    assert "needs a CUDA GPU (8 per group of ranks; this machine has" in named.stdout
    assert "NOT RUN, so not proven here" in named.stdout and "solution.py" not in named.stdout
    assert "not proven here (needs a CUDA GPU): tree-lab" in named.stderr
    every = subprocess.run(
        [ringlab, "lab", "test", "--no-record"], capture_output=True, text=True, cwd=REPO, env=env, timeout=300,
        check=False,
    )  # fmt: skip
    assert every.returncode == 0, every.stdout + every.stderr
    assert "(skipped, needing a CUDA GPU: tree-lab)" in every.stdout
