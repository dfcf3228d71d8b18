"""A static pre-check: refuse, before anything runs, a submission that reaches into the grader.

The code is parsed with ``ast`` and never run. Each rule names one way of reaching past the
student's own objects into the code that shares the rank with it (the harness, the lab's public
driver, the import system): reading stack frames, walking the garbage collector, tracing hooks,
``sys.modules`` writes, patching the driver module, ``ctypes``... A lab may lift rules its own
honest code needs (``precheck: {allow: [...]}`` in ``lab.yaml``).

This is a speed bump, not a wall: code built at run time can always get past a static check
(a module written to disk and imported, ``pickle``, a name spelt out at run time). No point
depends on it; every guarantee the grader gives holds without it, because points come only from
results compared outside the sandbox and from what the trusted side observes from outside the
ranks. What it buys is an early, clear refusal instead of a silent zero. Stdlib only, pure.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Iterable
from dataclasses import dataclass


@dataclass(frozen=True)
class Rule:
    why: str  # what such code does, after "line N: X "
    fix: str  # what the student should do instead


RULES: dict[str, Rule] = {
    "frames": Rule(
        "reads stack frames, the grader's included",
        "pass what your code needs as arguments and return what it computes",
    ),
    "gc": Rule(
        "walks the garbage collector's objects, the grader's included",
        "keep references to the objects you create yourself",
    ),
    "import-system": Rule(
        "changes the import system (sys.modules, sys.meta_path, sys.path_hooks), and so the modules the grader uses",
        "import modules with import statements and leave sys.modules as it is",
    ),
    "tracing": Rule(
        "installs a trace, profile or audit hook, which watches the grader's code run",
        "remove it; time your own code with time.perf_counter if you need to",
    ),
    "public-modules": Rule(
        "changes the lab's public code, which the grader runs as published",
        "change your own code instead and leave the driver's functions, classes and variables as they are",
    ),
    "engine": Rule(
        "imports the grader's own modules",
        "use torch, the standard library and the lab's public files only",
    ),
    "native": Rule(
        "loads native code (ctypes, cffi) or opens process memory, which can rewrite the grader's memory",
        "write it in Python with torch",
    ),
    "builtins": Rule(
        "changes Python's builtins, which the grader's code uses too",
        "give your own function a name of its own instead of replacing a builtin",
    ),
    "introspection": Rule(
        "reaches into other code's internals (__globals__, __code__, __closure__, __subclasses__)",
        "call functions and use objects through their public interface",
    ),
    "dynamic-code": Rule(
        "runs code made at run time (exec, eval, compile, runpy, importing a computed name), which cannot be checked",
        "write the code out in your file and import modules by name",
    ),
}

# Dotted names (after resolving imports and aliases) that may not be used at all.
BANNED: dict[str, str] = {
    **dict.fromkeys(
        (
            "sys._getframe",
            "sys._getframemodulename",
            "sys._current_frames",
            "sys._current_exceptions",
            "inspect.currentframe",
            "inspect.stack",
            "inspect.trace",
            "inspect.getouterframes",
            "inspect.getinnerframes",
            "traceback.walk_stack",
        ),
        "frames",
    ),
    **dict.fromkeys(("gc.get_objects", "gc.get_referrers", "gc.get_referents"), "gc"),
    **dict.fromkeys(
        (
            "sys.settrace",
            "sys.setprofile",
            "sys.addaudithook",
            "sys.monitoring",
            "sys.remote_exec",
            "threading.settrace",
            "threading.setprofile",
            "threading.settrace_all_threads",
            "threading.setprofile_all_threads",
        ),
        "tracing",
    ),
    "inspect.getclosurevars": "introspection",
    **dict.fromkeys(
        (
            "exec",
            "eval",
            "compile",
            "builtins.exec",
            "builtins.eval",
            "builtins.compile",
            "runpy.run_path",
            "runpy.run_module",
        ),
        "dynamic-code",
    ),
}
# Attributes refused on any object: no honest lab code needs them.
ATTRIBUTES: dict[str, str] = {
    **dict.fromkeys(
        ("f_back", "f_locals", "f_globals", "f_builtins", "f_trace", "tb_frame", "gi_frame", "cr_frame", "ag_frame"),
        "frames",
    ),
    **dict.fromkeys(("__subclasses__", "__globals__", "__code__", "__closure__"), "introspection"),
    "__builtins__": "builtins",
}
IMPORT_STATE = {"sys.modules", "sys.meta_path", "sys.path_hooks", "sys.path_importer_cache"}
ENGINE = {"labs", "__main__"}  # the grading engine's package in the rank, and the process's main module
NATIVE = {"ctypes", "_ctypes", "cffi", "_cffi_backend"}
IMPORTERS = {"__import__", "importlib.import_module", "importlib.__import__"}
BUILTINS = {"getattr", "setattr", "delattr", "hasattr", "vars", "exec", "eval", "compile", "__import__"}
MUTATORS = {
    "update",
    "pop",
    "popitem",
    "setdefault",
    "clear",
    "append",
    "extend",
    "insert",
    "remove",
    "__setitem__",
    "__delitem__",
    "__setattr__",
    "__delattr__",
}
PROC_MEM = re.compile(r"^/proc/(self|thread-self|\d+)(/task/\d+)?/mem$")
SHOWN = 60  # characters of a refused expression quoted in the message


@dataclass(frozen=True, order=True)
class Finding:
    line: int
    rule: str
    what: str  # the refused code, as written ("sys._getframe", "driver.train = ...", "import ctypes")
    why: str = ""  # the rule's own words unless set

    def __str__(self) -> str:
        return f"line {self.line}: {self.what} {self.why or RULES[self.rule].why}"


def check(code: str, *, public_files: Iterable[str] = (), allow: Iterable[str] = ()) -> list[Finding]:
    """What in ``code`` reaches into the grader, by line; empty when nothing does. Runs nothing.

    ``public_files`` are the lab's public files (``driver.py``): their modules may be used but not
    changed. ``allow`` lifts rules by name (``RULES``). Code that does not parse has no findings
    (the caller reports the syntax error).
    """
    try:
        tree = ast.parse(code)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return []
    allowed = set(allow)
    try:
        found = _Checker(tree, {f.removesuffix(".py") for f in public_files}).findings()
    except RecursionError:
        # Only code built to defeat the check nests this deep (a chain of a thousand attributes).
        found = [Finding(1, "dynamic-code", "the file", "nests expressions too deeply to be checked")]
    unique: dict[tuple[int, str], Finding] = {}
    for f in found:
        unique.setdefault((f.line, f.rule), f)
    return sorted((f for f in unique.values() if f.rule not in allowed), key=lambda f: f.line)


def message(findings: list[Finding]) -> str:
    """What a student reads: the first thing refused, why, what to do, and where else."""
    first = findings[0]
    text = f"Not allowed, so nothing was run: {first}. Instead, {RULES[first.rule].fix}."
    rest = findings[1:]
    if rest:
        shown = ", ".join(f"line {f.line} ({f.what})" for f in rest[:8])
        text += f" Also not allowed: {shown}" + (f" and {len(rest) - 8} more" if len(rest) > 8 else "") + "."
    return text


def refusal(code: str, *, public_files: Iterable[str] = (), allow: Iterable[str] = ()) -> str | None:
    """The message refusing ``code``, or None when the pre-check finds nothing."""
    found = check(code, public_files=public_files, allow=allow)
    return message(found) if found else None


def _root(name: str) -> str:
    return name.split(".", 1)[0]


def _shown(node: ast.AST) -> str:
    text = ast.unparse(node)
    return text if len(text) <= SHOWN else text[: SHOWN - 3] + "..."


def _text(node: ast.AST | None) -> str | None:
    return node.value if isinstance(node, ast.Constant) and isinstance(node.value, str) else None


class _Checker:
    """Learns the names the code binds, then looks at each node once (no recursion over statements)."""

    def __init__(self, tree: ast.Module, public: set[str]):
        self.nodes = list(ast.walk(tree))
        self.public = public
        self.aliases: dict[str, set[str]] = {}  # local name -> dotted names it may stand for
        self.stars: set[str] = set()  # modules imported with *
        self.bound: set[str] = set()  # names the code binds itself (so not the builtin of that name)
        self.found: list[Finding] = []
        self._learn()

    # -- names -----------------------------------------------------------------------------

    def _learn(self) -> None:
        modules: list[tuple[str, ast.expr]] = []
        for node in self.nodes:
            if isinstance(node, ast.Import):
                for a in node.names:
                    local = a.asname or a.name.split(".")[0]
                    self.aliases.setdefault(local, set()).add(a.name if a.asname else local)
            elif isinstance(node, ast.ImportFrom) and not node.level and node.module:
                for a in node.names:
                    if a.name == "*":
                        self.stars.add(node.module)
                    else:
                        self.aliases.setdefault(a.asname or a.name, set()).add(f"{node.module}.{a.name}")
            elif isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
                self.bound.add(node.name)
            elif isinstance(node, ast.arg):
                self.bound.add(node.arg)
            elif isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
                self.bound.add(node.id)
            if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
                modules.append((node.targets[0].id, node.value))
        # ``d = importlib.import_module("driver")``, ``m = sys.modules``: names for what the checks watch.
        for _ in range(3):
            for name, value in modules:
                watched = {n for n in self.names(value) if self._watched(n)}
                self.aliases.setdefault(name, set()).update(watched)

    def _watched(self, name: str) -> bool:
        root = _root(name)
        return (
            name in self.public
            or name in IMPORT_STATE
            or root in ENGINE
            or root in NATIVE
            or root in {"sys", "builtins", "gc", "inspect", "importlib", "threading", "traceback", "runpy"}
        )

    def names(self, node: ast.AST) -> set[str]:
        """The dotted names an expression may stand for: ``sys._getframe``, ``driver.train``..."""
        if isinstance(node, ast.Name):
            found = set(self.aliases.get(node.id, ()))
            if node.id in BUILTINS and node.id not in self.bound:
                found.add(node.id)
            if node.id not in self.bound:  # ``from inspect import *`` then ``stack()``
                found.update(f"{m}.{node.id}" for m in self.stars)
            return found
        if isinstance(node, ast.Attribute):
            return {f"{n}.{node.attr}" for n in self.names(node.value)}
        if isinstance(node, ast.Subscript):
            key = _text(node.slice)
            return {key} if key and "sys.modules" in self.names(node.value) else set()
        if isinstance(node, ast.Call):
            fn = self.names(node.func)
            first = _text(node.args[0]) if node.args else None
            second = _text(node.args[1]) if len(node.args) > 1 else None
            if fn & {"getattr", "builtins.getattr"} and node.args and second:
                return {f"{n}.{second}" for n in self.names(node.args[0])}
            if fn & IMPORTERS and first:
                return {first, _root(first)}
            if fn & {"vars", "builtins.vars"} and len(node.args) == 1:
                return {f"{n}.__dict__" for n in self.names(node.args[0])}
        return set()

    # -- findings --------------------------------------------------------------------------

    def add(self, node: ast.AST, rule: str, what: str) -> None:
        self.found.append(Finding(getattr(node, "lineno", 1), rule, what))

    def findings(self) -> list[Finding]:
        for node in self.nodes:
            if isinstance(node, ast.Import):
                for a in node.names:
                    self._module(node, a.name, f"import {a.name}")
            elif isinstance(node, ast.ImportFrom) and not node.level and node.module:
                self._module(node, node.module, f"from {node.module} import ...")
                for a in node.names:
                    rule = BANNED.get(f"{node.module}.{a.name}")
                    if rule:
                        self.add(node, rule, f"from {node.module} import {a.name}")
            elif isinstance(node, ast.Name):
                if node.id == "__builtins__":
                    self.add(node, "builtins", "__builtins__")
                elif isinstance(node.ctx, ast.Load):
                    self._banned(node)
            elif isinstance(node, ast.Attribute):
                rule = ATTRIBUTES.get(node.attr)
                if rule:
                    self.add(node, rule, _shown(node))
                self._banned(node)
                if isinstance(node.ctx, ast.Store | ast.Del):
                    self._write(node, node.value, {f"{n}.{node.attr}" for n in self.names(node.value)})
            elif isinstance(node, ast.Subscript):
                self._engine_key(node)
                if isinstance(node.ctx, ast.Store | ast.Del):
                    self._write(node, node.value, set())
            elif isinstance(node, ast.Call):
                self._call(node)
            elif isinstance(node, ast.Constant | ast.JoinedStr):
                self._proc_mem(node)
        return self.found

    def _module(self, node: ast.AST, module: str, what: str) -> None:
        if _root(module) in ENGINE:
            self.add(node, "engine", what)
        elif _root(module) in NATIVE:
            self.add(node, "native", what)

    def _banned(self, node: ast.AST) -> None:
        for name in self.names(node):
            rule = BANNED.get(name) or ("tracing" if name.startswith("sys.monitoring.") else None)
            if rule:
                self.add(node, rule, name)

    def _engine_key(self, node: ast.Subscript) -> None:
        key = _text(node.slice)
        if key and "sys.modules" in self.names(node.value):
            self._module(node, key, f"sys.modules[{key!r}]")

    def _write(self, node: ast.AST, base: ast.expr, full: set[str]) -> None:
        """``node`` (an attribute or item of ``base``) is assigned or deleted."""
        verb = "del " if isinstance(getattr(node, "ctx", None), ast.Del) else ""
        what = f"{verb}{_shown(node)}" + ("" if verb else " = ...")
        self._changes(node, self.names(base) | full, what)

    def _changes(self, node: ast.AST, names: set[str], what: str) -> None:
        """Code at ``node`` changes whatever ``names`` stand for."""
        for name in names:
            if name in IMPORT_STATE or any(name.startswith(f"{s}.") for s in IMPORT_STATE):
                self.add(node, "import-system", what)
            elif _root(name) == "builtins" and name != "builtins":
                self.add(node, "builtins", what)
            elif _root(name) in self.public and name not in self.public:
                self.add(node, "public-modules", what)

    def _call(self, node: ast.Call) -> None:
        fn = self.names(node.func)
        self._banned(node)  # getattr(sys, "_getframe")
        attr = _text(node.args[1]) if len(node.args) > 1 else None
        if fn & {"getattr", "hasattr", "setattr", "delattr"} | {f"builtins.{f}" for f in BUILTINS} and attr:
            rule = ATTRIBUTES.get(attr)
            if rule:
                self.add(node, rule, f"{ast.unparse(node.func)}(..., {attr!r})")
        setter = fn & {"setattr", "delattr", "builtins.setattr", "builtins.delattr"}
        method = node.func.attr if isinstance(node.func, ast.Attribute) else None
        if (setter or method in ("__setattr__", "__delattr__")) and node.args:
            # setattr(driver, "x", v), object.__setattr__(driver, ...): the first argument is changed.
            target = {f"{n}.{attr or '*'}" for n in self.names(node.args[0])}
            self._changes(node, target, f"{_shown(node.func)}({_shown(node.args[0])}, ...)")
        if method in MUTATORS and isinstance(node.func, ast.Attribute):
            # sys.modules.update(...), driver.__dict__.pop(...), driver.__setattr__(...); not driver.update(...),
            # a call of the driver's own function.
            base = self.names(node.func.value)
            if not method.startswith("__"):
                base -= self.public
            self._changes(node, {f"{n}.{method}" for n in base}, f"{_shown(node.func)}(...)")
        if fn & (IMPORTERS | {"builtins.__import__"}):
            name = _text(node.args[0]) if node.args else None
            if name is None:
                self.add(node, "dynamic-code", f"{_shown(node.func)}(<a computed name>)")
            else:
                self._module(node, name, f"{_shown(node.func)}({name!r})")

    def _proc_mem(self, node: ast.Constant | ast.JoinedStr) -> None:
        if isinstance(node, ast.Constant):
            text = _text(node)
            if text and PROC_MEM.match(text):
                self.add(node, "native", repr(text))
            return
        parts = [_text(v) for v in node.values]
        if parts and (parts[0] or "").startswith("/proc/") and (parts[-1] or "").endswith("/mem"):
            self.add(node, "native", _shown(node))
