"""Type-check every lab's Python files (content/labs) with the project's mypy settings.

Each lab folder holds modules with the same names (checks.py, driver.py, solution.py...) in a
folder whose name is not a Python identifier, so mypy cannot take them as they lie. This links
each lab's files into a package of its own in a temporary directory (``labs_<id>.checks``), puts
the shared helpers (content/labs/_common, imported by their plain names in the ranks) on the
search path, and runs mypy once over them all. Problems are reported at the real paths.

    .venv/bin/python scripts/typecheck_labs.py [CONTENT_LABS_DIR]
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def main() -> int:
    labs = Path(sys.argv[1]).resolve() if len(sys.argv) > 1 else REPO / "content" / "labs"
    common = labs / "_common"
    with tempfile.TemporaryDirectory(prefix="ringlab-typecheck-") as tmp:
        farm = Path(tmp)
        real: dict[str, Path] = {}
        for folder in sorted(p for p in labs.iterdir() if (p / "lab.yaml").is_file()):
            package = farm / ("labs_" + re.sub(r"\W", "_", folder.name))
            package.mkdir()
            (package / "__init__.py").write_text("")
            for file in sorted(folder.glob("*.py")):
                (package / file.name).symlink_to(file)
                real[str(package / file.name)] = file
        env = {**os.environ, "MYPYPATH": os.pathsep.join(filter(None, [str(REPO), str(common)]))}
        command = [sys.executable, "-m", "mypy", "--config-file", str(REPO / "pyproject.toml")]
        command += ["--no-namespace-packages", str(farm)]
        if common.is_dir():
            command += sorted(str(p) for p in common.glob("*.py"))
        done = subprocess.run(command, cwd=REPO, env=env, capture_output=True, text=True)
        out = done.stdout + done.stderr
        for link, file in real.items():  # problems name the real files, relative to the repository
            out = out.replace(link, str(file.relative_to(REPO)) if file.is_relative_to(REPO) else str(file))
        sys.stdout.write(out)
        return done.returncode


if __name__ == "__main__":
    sys.exit(main())
