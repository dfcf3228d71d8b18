"""The checks contract, read from the lab's files' syntax trees: the mistakes an author makes, found early.

A lab's ``checks.py`` implements a protocol the grader calls: ``cases(world_size, gen)`` or
``phases(world_sizes, gen)`` builds the calls, each a ``Case`` whose ``check`` (and ``parts``
keys) name checks of ``lab.yaml``; ``RULES`` maps check ids to the functions that judge them;
a check without a rule is judged by comparing its cases' results with the reference. Each
name that crosses from one file to another is a place a typo used to pass silently until a
student's submission was graded ("no cases were run for this check", or the student's
"runtime error" for a driver function that does not exist). Here they are checked without
running anything: no torch import, so ``ringlab content check`` stays fast. What only running
can tell (a tolerance path that matches no result) is ``ringlab lab test``'s.
"""

from __future__ import annotations

import ast
import functools
import importlib.util
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

from labs.spec import UNJUDGED, LabProblem, LabSpec

Lines = dict[tuple[object, ...], int]


@dataclass(frozen=True)
class Module:
    """What the checks contract needs from one file: its top-level names and its syntax tree."""

    tree: ast.Module
    defined: dict[str, int]  # top-level name -> line (def, class, assignment, import)
    functions: dict[str, ast.FunctionDef | ast.AsyncFunctionDef]

    @functools.cached_property
    def nodes(self) -> Nodes:
        """One walk of the whole tree for what the contract looks for in it (walks are most of its cost)."""
        found = Nodes(set(), [], [])
        for node in ast.walk(self.tree):
            if isinstance(node, ast.Constant) and isinstance(node.value, str):
                found.strings.add(node.value)
            elif isinstance(node, ast.Call):
                f = node.func
                if (isinstance(f, ast.Name) and f.id == "Case") or (isinstance(f, ast.Attribute) and f.attr == "Case"):
                    found.cases.append(node)
            elif isinstance(node, ast.Import | ast.ImportFrom):
                found.imports.append(node)
        return found


@dataclass
class Nodes:
    strings: set[str]  # every string constant
    cases: list[ast.Call]  # every call of Case (or <module>.Case)
    imports: list[ast.Import | ast.ImportFrom]


def read(text: str, path: str) -> Module | LabProblem:
    """Parse ``text``; a syntax error is a problem at its line."""
    try:
        tree = ast.parse(text, path)
    except (SyntaxError, ValueError) as exc:
        return LabProblem(path, getattr(exc, "lineno", None) or 1, f"not valid Python: {getattr(exc, 'msg', exc)}")
    return Module(tree, dict(_top_level(tree)), {
        n.name: n for n in tree.body if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef)
    })  # fmt: skip


def _top_level(tree: ast.Module) -> Iterator[tuple[str, int]]:
    for node in tree.body:
        yield from _bound(node)


def _bound(node: ast.stmt) -> Iterator[tuple[str, int]]:
    if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
        yield node.name, node.lineno
    elif isinstance(node, ast.Assign | ast.AnnAssign | ast.AugAssign):
        targets = node.targets if isinstance(node, ast.Assign) else [node.target]
        for target in targets:
            for name in ast.walk(target):
                if isinstance(name, ast.Name):
                    yield name.id, node.lineno
    elif isinstance(node, ast.Import | ast.ImportFrom):
        for alias in node.names:
            yield (alias.asname or alias.name.split(".")[0]), node.lineno
    elif isinstance(node, ast.If | ast.Try | ast.With):  # a guarded import or definition still defines
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.stmt):
                yield from _bound(child)
            elif isinstance(child, ast.ExceptHandler):
                for stmt in child.body:
                    yield from _bound(stmt)


API = "labs.authoring"


@functools.cache
def _api_names() -> frozenset[str]:
    """The names the authoring API's ``__all__`` lists, read from its source (nothing is imported)."""
    spec = importlib.util.find_spec(API)
    assert spec is not None and spec.origin is not None, "the engine's authoring API is missing"
    tree = ast.parse(Path(spec.origin).read_text(encoding="utf-8"))
    for node in tree.body:
        if not (isinstance(node, ast.Assign) and isinstance(node.value, ast.List | ast.Tuple)):
            continue
        if any(isinstance(t, ast.Name) and t.id == "__all__" for t in node.targets):
            return frozenset(n for e in node.value.elts if (n := _string(e)) is not None)
    raise AssertionError(f"{API} has no literal __all__")


def _string(node: ast.expr | None) -> str | None:
    return node.value if isinstance(node, ast.Constant) and isinstance(node.value, str) else None


def _argument(call: ast.Call, position: int, keyword: str) -> ast.expr | None:
    for kw in call.keywords:
        if kw.arg == keyword:
            return kw.value
    return call.args[position] if len(call.args) > position else None


@dataclass
class Contract:
    """One lab's files, ready to be checked against its ``lab.yaml``."""

    spec: LabSpec
    path: Callable[[str], str]  # a file of the lab folder (``checks.py``) as problems name it
    lines: Lines  # ``lab.yaml`` locations -> line
    checks: Module
    modules: dict[str, Module]  # the other Python files of the folder by file name (parsed ones only)

    def at(self, name: str, line: int, message: str) -> LabProblem:
        return LabProblem(self.path(name), line, message)

    def yaml_line(self, *loc: object) -> int:
        while loc and loc not in self.lines:
            loc = loc[:-1]
        return self.lines.get(loc, 1)

    def problems(self) -> list[LabProblem]:
        return [
            *self.imports(),
            *self.entry_points(),
            *self.rules(),
            *self.cases(),
            *self.unjudged(),
            *self.functions(),
        ]

    def imports(self) -> Iterator[LabProblem]:
        """The engine only through ``labs.authoring``, and only names its ``__all__`` lists."""
        api = _api_names()
        for node in self.checks.nodes.imports:
            if isinstance(node, ast.ImportFrom) and node.level == 0:
                modules = [node.module or ""]
            elif isinstance(node, ast.Import):
                modules = [alias.name for alias in node.names]
            else:
                continue
            for module in modules:
                if module.split(".")[0] != "labs":
                    continue
                if module != API:
                    yield self.at(
                        "checks.py", node.lineno,
                        f"imports {module}: a lab imports the engine from {API} only (its names are listed in"
                        " docs/authoring-labs.md)",
                    )  # fmt: skip
                elif isinstance(node, ast.ImportFrom):
                    missing = [a.name for a in node.names if a.name != "*" and a.name not in api]
                    if missing:
                        yield self.at(
                            "checks.py", node.lineno,
                            f"{API} has no {', '.join(missing)}: its names are listed in docs/authoring-labs.md",
                        )  # fmt: skip

    def entry_points(self) -> Iterator[LabProblem]:
        """``cases(world_size, gen)`` or ``phases(world_sizes, gen)``: the grader calls one of them."""
        found = {n: self.checks.functions[n] for n in ("cases", "phases") if n in self.checks.functions}
        if not found:
            yield self.at(
                "checks.py", 1, "defines neither cases(world_size, gen) nor phases(world_sizes, gen): the grader"
                " calls one of them to build the calls it runs",
            )  # fmt: skip
        for name, fn in found.items():
            params = [*fn.args.posonlyargs, *fn.args.args]
            required = len(params) - len(fn.args.defaults)
            if required > 2 or (len(params) < 2 and fn.args.vararg is None):
                first = "world_size" if name == "cases" else "world_sizes"
                yield self.at(
                    "checks.py", fn.lineno,
                    f"{name}() takes {len(params)} positional parameters; the grader calls {name}({first}, gen)",
                )  # fmt: skip

    def rules(self) -> Iterator[LabProblem]:
        """``RULES`` is a literal dict; each key a check of ``lab.yaml``, each value a function checks.py has."""
        ids = {c.id for c in self.spec.checks}
        for node in self.checks.tree.body:
            target = node.targets[0] if isinstance(node, ast.Assign) and len(node.targets) == 1 else None
            target = node.target if isinstance(node, ast.AnnAssign) else target
            if not (isinstance(target, ast.Name) and target.id == "RULES"):
                continue
            value = node.value if isinstance(node, ast.Assign | ast.AnnAssign) else None
            if not isinstance(value, ast.Dict):
                yield self.at(
                    "checks.py", node.lineno,
                    'RULES must be written out as a dict, {"check-id": function, ...}, so that its ids can be checked',
                )  # fmt: skip
                continue
            for k, v in zip(value.keys, value.values, strict=True):
                key = _string(k)
                if k is None or key is None:
                    continue
                if key not in ids:
                    yield self.at(
                        "checks.py", k.lineno, f"RULES names '{key}', which is not a check in lab.yaml{_known(ids)}"
                    )
                if isinstance(v, ast.Name) and v.id not in self.checks.defined:
                    yield self.at("checks.py", k.lineno, f"RULES['{key}'] is {v.id}, which checks.py does not define")

    def cases(self) -> Iterator[LabProblem]:
        """Each ``Case``'s check and ``parts`` keys are checks of ``lab.yaml``; its ``driver`` is a function of
        driver.py."""
        ids = {c.id for c in self.spec.checks}
        driver = self.modules.get("driver.py")
        for call in self.checks.nodes.cases:
            check_arg = _argument(call, 0, "check")
            check = _string(check_arg)
            if check_arg is not None and check is not None and check not in ids and check != UNJUDGED:
                yield self.at(
                    "checks.py",
                    check_arg.lineno,
                    f"a Case judges '{check}', which is not a check in lab.yaml{_known(ids)}",
                )
            parts = _argument(call, 8, "parts")
            if isinstance(parts, ast.Dict):
                for key in parts.keys:
                    part = _string(key)
                    if key is not None and part is not None and part not in ids:
                        yield self.at(
                            "checks.py", key.lineno, f"parts names '{part}', which is not a check in lab.yaml"
                        )
            driver_arg = _argument(call, 7, "driver")
            name = _string(driver_arg)
            if driver_arg is None or name is None:
                continue
            if "driver.py" not in self.spec.public_files:
                yield self.at(
                    "checks.py",
                    driver_arg.lineno,
                    f"a Case runs driver.{name}, but lab.yaml's public_files has no driver.py",
                )
            elif driver is not None and name not in driver.defined:
                yield self.at(
                    "checks.py", driver_arg.lineno,
                    f"a Case runs driver.{name}, which driver.py does not define: every student would get a"
                    " runtime error",
                )  # fmt: skip

    def unjudged(self) -> Iterator[LabProblem]:
        """Each check of ``lab.yaml`` is named in checks.py (a rule, a case, a part): else it could never pass."""
        named = self.checks.nodes.strings
        for i, check in enumerate(self.spec.checks):
            if check.id not in named:
                yield self.at(
                    "lab.yaml", self.yaml_line("checks", i, "id"),
                    f"check '{check.id}' is judged by nothing in checks.py: no RULES entry, no Case and no parts key"
                    " names it",
                )  # fmt: skip

    def functions(self) -> Iterator[LabProblem]:
        """Each name in ``functions:`` is defined by the starter and the solution (the student's module)."""
        for name in ("starter.py", "solution.py"):
            module = self.modules.get(name)
            if module is None:
                continue
            for i, fn in enumerate(self.spec.functions):
                if fn not in module.defined:
                    yield self.at(
                        "lab.yaml", self.yaml_line("functions", i),
                        f"functions names {fn}, which {name} does not define",
                    )  # fmt: skip


def _known(ids: set[str]) -> str:
    return f" (its checks: {', '.join(sorted(ids))})"


def check(spec: LabSpec, path: Callable[[str], str], lines: Lines, texts: dict[str, str]) -> list[LabProblem]:
    """Every contract problem of one lab; ``texts`` holds its Python files by name (checks.py at least).

    ``path`` names a file of the lab as problems give it; ``lines`` is where each ``lab.yaml`` field is.

    A file that does not parse is one problem and the contract is not read further for it.
    """
    parsed: dict[str, Module] = {}
    problems: list[LabProblem] = []
    for name, text in texts.items():
        module = read(text, path(name))
        if isinstance(module, LabProblem):
            problems.append(module)
        else:
            parsed[name] = module
    checks = parsed.pop("checks.py", None)
    if checks is None:
        return problems
    return problems + Contract(spec, path, lines, checks, parsed).problems()
