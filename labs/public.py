"""A lab's public files, imported outside the sandbox by its trusted ``checks.py``.

The ranks import ``driver.py`` by its plain name from the read-only folder the
zygote writes. Here, in the worker, several labs' ``driver.py`` live side by
side, so each is imported under a name of its own and never through ``sys.path``.
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType


def load_public(beside: str | Path, name: str = "driver") -> ModuleType:
    """``<name>.py`` from the lab folder that holds ``beside`` (pass ``__file__`` from checks.py)."""
    folder = Path(beside).resolve()
    folder = folder if folder.is_dir() else folder.parent
    key = f"ringlab_public_{folder.name.replace('-', '_').replace('.', '_')}_{name}"
    module = sys.modules.get(key)
    path = folder / f"{name}.py"
    if module is None or getattr(module, "__file__", None) != str(path):
        spec = importlib.util.spec_from_file_location(key, path)
        if spec is None or spec.loader is None:
            raise ImportError(f"no public file {path}")
        module = importlib.util.module_from_spec(spec)
        sys.modules[key] = module
        spec.loader.exec_module(module)
    return module


def load_trusted(beside: str | Path, name: str) -> ModuleType:
    """``<name>.py``, a trusted helper beside ``checks.py``: a file ``lab.yaml`` leaves out of ``public_files``."""
    return load_public(beside, name)
