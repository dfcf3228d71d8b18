"""Type-check the labs' trusted and public code (content/labs) with the project's mypy settings.

What is checked: each lab's ``checks.py``, its driver and other public or trusted helpers, and the
shared helpers in ``content/labs/_common``: the code authors write against the authoring API. A
lab's ``solution.py`` and ``starter.py`` are written as students write torch code (and every
mutant is a diff of the solution), so they are proven by running them (``ringlab lab test``)
instead.

Each lab folder holds modules with the same names in a folder whose name is not a Python
identifier, so mypy cannot take them as they lie: this links each lab's files into a package of
its own (``labs_<id>.checks``) under ``build/typecheck-labs`` (a fixed place, so mypy's cache stays
right), puts ``_common`` on the search path (the ranks import its modules by their plain names),
and runs mypy once over them all. Problems name the real files.

``--with-project`` checks the project's own packages (``app``, ``labs``) and the docs site's build
hooks (``docs/hooks``) in the same mypy run, with the project's cache: the test command does, so
that torch's types are read once, not twice.

    .venv/bin/python scripts/typecheck_labs.py [--with-project] [CONTENT_LABS_DIR]
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
FARM = REPO / "build" / "typecheck-labs"
STUDENTS = {"solution.py", "starter.py"}


def main() -> int:
    args = sys.argv[1:]
    project = "--with-project" in args
    args = [a for a in args if a != "--with-project"]
    labs = Path(args[0]).resolve() if args else REPO / "content" / "labs"
    common = labs / "_common"
    shutil.rmtree(FARM, ignore_errors=True)
    FARM.mkdir(parents=True)
    real: dict[str, Path] = {}
    for folder in sorted(p for p in labs.iterdir() if (p / "lab.yaml").is_file()):
        package = FARM / ("labs_" + re.sub(r"\W", "_", folder.name))
        package.mkdir()
        (package / "__init__.py").write_text("")
        for file in sorted(folder.glob("*.py")):
            if file.name not in STUDENTS:
                (package / file.name).symlink_to(file)
                real[str((package / file.name).relative_to(REPO))] = file
    env = {**os.environ, "MYPYPATH": os.pathsep.join([str(REPO), str(common)])}
    # A cache of its own: mypy keys a module's cached problems by its name and contents, and the
    # project's cache would answer for these modules with the paths another run gave them.
    command = [sys.executable, "-m", "mypy", "--config-file", str(REPO / "pyproject.toml")]
    if project:  # the default labs and the project together: module names and paths are always these
        command += [str(REPO / "app"), str(REPO / "labs"), str(FARM)]
        command += sorted(str(p) for p in (REPO / "docs" / "hooks").glob("*.py"))
    else:
        command += ["--cache-dir", str(REPO / "build" / "typecheck-labs-cache"), str(FARM)]
    command += sorted(str(p) for p in common.glob("*.py"))
    done = subprocess.run(command, cwd=REPO, env=env, capture_output=True, text=True)
    out = done.stdout + done.stderr
    for link, file in real.items():  # problems name the real files, relative to the repository
        out = out.replace(link, str(file.relative_to(REPO)) if file.is_relative_to(REPO) else str(file))
    sys.stdout.write(out.replace(str(REPO) + "/", ""))
    return done.returncode


if __name__ == "__main__":
    sys.exit(main())
