"""`ringlab ARGS` in the test process, for tests of what a command does rather than of the process it runs in.

It goes in where `python -m app` does (``app.cli.main``, with ``sys.argv`` set), with its own environment,
stdin, stdout and stderr, and answers as ``subprocess.run`` would: the exit status and both streams. A new
interpreter and the app's imports cost a second or two a command; this costs what the command does. An
exception no command handles ends it as the interpreter would: its traceback on stderr, exit status 1.
"""

from __future__ import annotations

import os
import subprocess
import sys
import traceback
from collections.abc import Mapping

from click.testing import CliRunner

from app.cli import main
from app.config import get_settings


def ringlab(*args: str, env: Mapping[str, str] | None = None, input: str = "") -> subprocess.CompletedProcess[str]:
    """Run ``ringlab *args`` with ``env`` as its whole environment (default: this process's), ``input`` on stdin."""
    environ = os.environ if env is None else env
    # The command sees exactly ``env``, as a child process would: what it leaves out is unset meanwhile.
    overrides: dict[str, str | None] = {key: None for key in os.environ if key not in environ}
    overrides.update(environ)
    argv, hook = sys.argv, sys.excepthook
    with CliRunner().isolation(input=input, env=overrides) as (out, err, _):
        sys.argv = ["ringlab", *args]
        get_settings.cache_clear()  # read once per process: this command's environment, not the last one's
        try:
            main()
            code = 0
        except SystemExit as exc:
            code = _exit_status(exc.code)
        except Exception:
            traceback.print_exc()
            code = 1
        finally:
            sys.argv, sys.excepthook = argv, hook  # typer installs its own hook for the process
            get_settings.cache_clear()
            sys.stdout.flush()
            sys.stderr.flush()
        stdout, stderr = out.getvalue().decode(), err.getvalue().decode()
    return subprocess.CompletedProcess(["ringlab", *args], code, stdout, stderr)


def _exit_status(code: object) -> int:
    """The status ``sys.exit(code)`` gives a process: 0 for None, the number, or 1 with the message on stderr."""
    if code is None:
        return 0
    if isinstance(code, int):
        return code
    print(code, file=sys.stderr)
    return 1
