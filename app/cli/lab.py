"""`ringlab lab`: prove labs, and start a new one."""

from __future__ import annotations

from typing import Annotated

import typer

from app.cli.check import content_dir, fail_on_problems

app = typer.Typer(help="Labs: prove them before students see them.", no_args_is_help=True)


@app.command("test")
def lab_test(
    lab_ids: Annotated[list[str] | None, typer.Argument(help="Lab ids (default: every lab).")] = None,
    record: Annotated[
        bool, typer.Option(help="Write the reference's communication picture to reference-wire.json.")
    ] = True,
    verbose: Annotated[
        bool, typer.Option("--verbose", "-v", help="Print every check's whole message for every file graded.")
    ] = False,
) -> None:
    """Prove labs: the reference at full marks, the starter below them without an error of ours, and each
    mutant in mutants/ losing exactly the checks its header names (``labs.spec.mutants``).

    A diff that no longer applies or a wrong header is an authoring error (``path:line: message``) and the
    lab is not proven. A reference slower to grade than the lab's target is a warning, not a failure.
    A GPU-only lab (``needs_gpu``) on a machine without enough CUDA GPUs is not run: named, the command
    exits 3; in a run of every lab it is listed as skipped and the exit code is the other labs'.
    """
    from labs.host.grader import Grader, gpu_count
    from labs.host.prove import (
        MIN_MUTANTS,
        built_cases,
        case_problems,
        prove,
        record_reference_wire,
        slow_warning,
        summary,
        table,
        tolerance_problems,
    )
    from labs.spec import LabError, load_labs, mutants

    root = content_dir() / "labs"
    try:
        labs = load_labs(root)
    except LabError as exc:
        for problem in exc.problems:
            typer.echo(str(problem), err=True)
        raise typer.Exit(1) from None
    unknown = sorted(set(lab_ids or []) - set(labs))
    if unknown:
        typer.echo(f"no such lab: {', '.join(unknown)} (labs: {', '.join(sorted(labs))})", err=True)
        raise typer.Exit(2)
    failed, unproven = [], []
    gpus = gpu_count()
    with Grader(root, pool_size=1, gpus=gpus > 0) as grader:
        for lab_id in lab_ids or sorted(labs):
            lab = labs[lab_id]
            if lab.spec.needs_gpu and gpus < max(lab.spec.world_sizes):
                typer.echo(
                    f"\n{lab_id}: {lab.spec.title}\n  needs a CUDA GPU ({max(lab.spec.world_sizes)} per group of"
                    f" ranks; this machine has {gpus}): NOT RUN, so not proven here. Run it on a GPU node."
                )
                unproven.append(lab_id)
                continue
            try:
                found = mutants.load(lab)
            except LabError as exc:
                typer.echo(f"\n{lab_id}: {lab.spec.title}")
                for problem in exc.problems:
                    typer.echo(str(problem), err=True)
                failed.append(lab_id)
                continue
            rows = prove(grader, lab, found)
            typer.echo(f"\n{lab_id}: {lab.spec.title}\n{table(lab, rows, verbose=verbose)}")
            cases = built_cases(lab)  # the plan's references, built once for both checks
            if problems := case_problems(lab, cases) + tolerance_problems(lab, cases):
                for line in problems:
                    typer.echo(f"  {line}", err=True)
                failed.append(lab_id)
                continue
            if warning := slow_warning(lab, rows):
                typer.echo(f"  {warning}")
            result = summary(rows)
            if result["mutants"] < MIN_MUTANTS:
                typer.echo(
                    f"  {lab_id}: {result['mutants']} mutants in mutants/, at least {MIN_MUTANTS} needed", err=True
                )
            if not result["ok"]:
                failed.append(lab_id)
            elif record and (path := record_reference_wire(lab, rows[0].verdict)):
                typer.echo(f"  recorded the reference's communication in {path}")
    if failed:
        typer.echo(f"\nNOT PROVEN: {', '.join(failed)}", err=True)
        raise typer.Exit(1)
    if unproven and lab_ids:
        # Named on purpose and not run: not a pass. 3, not 1: nothing was found wrong with them.
        typer.echo(f"\nnot proven here (needs a CUDA GPU): {', '.join(unproven)}", err=True)
        raise typer.Exit(3)
    skipped = f" (skipped, needing a CUDA GPU: {', '.join(unproven)})" if unproven else ""
    proven = "references at full marks, starters below them, every mutant losing its checks"
    typer.echo(f"\nevery lab proven: {proven}{skipped}")


@app.command("new")
def lab_new(
    lab_id: Annotated[str, typer.Argument(help="The new lab's id, its folder name in content/labs.")],
    exercise: Annotated[str, typer.Option(help="The exercise the lab grades by running code (its id).")],
    world_sizes: Annotated[str, typer.Option(help="Comma-separated world sizes the lab runs at.")] = "2,3,4",
    title: Annotated[str | None, typer.Option(help="The lab's title (default: from its id).")] = None,
    driver: Annotated[
        bool, typer.Option("--driver", help="A public driver.py owns the loop and calls the student's code.")
    ] = False,
    script: Annotated[bool, typer.Option("--script", help="The student writes a whole torchrun-style script.")] = False,
) -> None:
    """Write a complete lab folder to start from: proven as it stands (``ringlab lab test ID``), ready to edit.

    The example averages a tensor across the ranks and judges the result and the bytes each rank sends;
    comments marked EDIT show where an author changes it. Nothing is written if the id, the exercise or
    the world sizes are wrong, or the folder exists.
    """
    from app.content.loader import load_tree
    from app.content.source import ContentError
    from labs.host import scaffold

    content = content_dir()
    try:
        sizes = [int(s) for s in world_sizes.split(",") if s.strip()]
    except ValueError:
        typer.echo(f"--world-sizes takes numbers separated by commas, e.g. 2,3,4; got '{world_sizes}'", err=True)
        raise typer.Exit(2) from None
    try:
        exercises = {e.id for s in load_tree(content, check_markdown=False).exercise_sets for e in s.exercises}
    except ContentError as exc:
        fail_on_problems(exc)
    if exercise not in exercises:
        typer.echo(f"no exercise '{exercise}' in {content}/exercises: a lab grades one of the exercises", err=True)
        raise typer.Exit(2)
    try:
        files = scaffold.render(lab_id, exercise, sizes, driver=driver, script=script, title=title)
        folder = scaffold.write(content, files, lab_id)
    except scaffold.ScaffoldError as exc:
        typer.echo(str(exc), err=True)
        raise typer.Exit(2) from None
    for name in files:
        typer.echo(f"  wrote {folder / name}")
    typer.echo(
        f"\nNext: ringlab content check (it passes), then ringlab lab test {lab_id} (it proves the lab: the reference"
        " at full marks, each mutant losing its checks). Edit the lines marked EDIT, one step at a time, and prove"
        " it again after each. The authoring guide is docs/authoring-labs.md."
    )
