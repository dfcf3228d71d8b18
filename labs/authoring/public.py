"""A lab's public files, imported outside the sandbox by its trusted ``checks.py``.

The ranks import ``driver.py`` by its plain name from the read-only folder the
zygote writes, and a public file imports another the same way (``from mlp import
build_model``, a helper labs share from ``content/labs/_common/``). Here, in the
worker, several labs' ``driver.py`` live side by side, so each is imported under a
name of its own and never through ``sys.path``; while a public file runs its top
level, ``import <name>`` of another public file of its lab finds that lab's file, so
a driver imports its helpers here as it does in the ranks. Import them at the top of
the file: that is the only time the plain names resolve here.
"""

from __future__ import annotations

import importlib.abc
import importlib.machinery
import importlib.util
import sys
import threading
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from types import ModuleType

from labs.spec import LabError, parse_spec, public_path

_LOCK = threading.RLock()  # one import at a time: the plain names are process-wide while a file runs


def load_public(beside: str | Path, name: str = "driver") -> ModuleType:
    """``<name>.py`` of the lab folder that holds ``beside`` (pass ``__file__`` from checks.py).

    A public file the folder does not hold is the shared one (``labs.spec.public_path``).
    """
    folder = Path(beside).resolve()
    folder = folder if folder.is_dir() else folder.parent
    key = f"ringlab_public_{folder.name.replace('-', '_').replace('.', '_')}_{name}"
    path = public_path(folder, f"{name}.py")
    with _LOCK:
        module = sys.modules.get(key)
        if module is None or getattr(module, "__file__", None) != str(path):
            spec = importlib.util.spec_from_file_location(key, path)
            if spec is None or spec.loader is None:
                raise ImportError(f"no public file {path}")
            module = importlib.util.module_from_spec(spec)
            sys.modules[key] = module
            with _plain_names(folder, name):
                spec.loader.exec_module(module)
    return module


def _public_modules(folder: Path) -> list[str]:
    try:
        spec = parse_spec((folder / "lab.yaml").read_text(encoding="utf-8"), str(folder / "lab.yaml"))
    except (OSError, LabError):
        return []  # no lab here: nothing to resolve (loading the lab reports what is wrong)
    return [f.removesuffix(".py") for f in spec.public_files]


@contextmanager
def _plain_names(folder: Path, running: str) -> Iterator[None]:
    """While the public file ``running`` runs its top level: its lab's other public files by plain name."""
    names = [n for n in _public_modules(folder) if n != running]
    if running not in _public_modules(folder) or not names:
        yield  # a trusted file (checks.py, a helper beside it) gets no plain names
        return
    finder = _LabFinder(folder, names)
    before = {n: sys.modules.get(n) for n in names}
    sys.meta_path.insert(0, finder)
    try:
        yield
    finally:
        sys.meta_path.remove(finder)
        for n, module in before.items():
            if module is None:
                sys.modules.pop(n, None)
            else:
                sys.modules[n] = module


class _LabFinder(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """``import <name>`` of one lab's public files, each the module ``load_public`` keeps for it."""

    def __init__(self, folder: Path, names: list[str]) -> None:
        self.folder = folder
        self.names = set(names)
        self.specs: dict[int, importlib.machinery.ModuleSpec | None] = {}

    def find_spec(
        self, fullname: str, path: Sequence[str] | None = None, target: ModuleType | None = None
    ) -> importlib.machinery.ModuleSpec | None:
        if path is None and fullname in self.names:
            return importlib.util.spec_from_loader(fullname, self)
        return None

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> ModuleType:
        module = load_public(self.folder, spec.name)
        self.specs[id(module)] = module.__spec__  # the import system sets a plain-name spec on it next
        return module

    def exec_module(self, module: ModuleType) -> None:
        module.__spec__ = self.specs.pop(id(module))  # load_public has run it; it keeps its own name


def load_trusted(beside: str | Path, name: str) -> ModuleType:
    """``<name>.py``, a trusted helper beside ``checks.py``: a file ``lab.yaml`` leaves out of ``public_files``."""
    return load_public(beside, name)
