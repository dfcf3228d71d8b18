"""Reading authored files while remembering where every value came from.

Errors in content must name a file and a line, so YAML is composed into nodes
and rebuilt by hand: each value's path (``("questions", 3, "answer")``) maps to
the line it was written on. Markdown files carry YAML front matter between
``---`` lines and a Markdown body.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import yaml
from pydantic import ValidationError

Loc = tuple[str | int, ...]
# libyaml's parser when available: same nodes and marks, several times faster.
_Loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


@dataclass(frozen=True, order=True)
class Problem:
    """One thing wrong with the content, said so a person can fix it."""

    path: str
    line: int
    message: str

    def __str__(self) -> str:
        return f"{self.path}:{self.line}: {self.message}"


class ContentError(Exception):
    """The content tree is invalid; ``problems`` lists every reason."""

    def __init__(self, problems: list[Problem]):
        self.problems = sorted(problems)
        super().__init__("\n".join(str(p) for p in self.problems))


@dataclass
class Source:
    """A file's parsed data and the line of every value in it."""

    path: str
    data: Any
    lines: dict[Loc, int] = field(default_factory=dict)

    def line(self, loc: Loc = ()) -> int:
        """The line of ``loc``, or of its nearest enclosing value."""
        loc = tuple(loc)
        while loc:
            if loc in self.lines:
                return self.lines[loc]
            loc = loc[:-1]
        return self.lines.get((), 1)

    def problem(self, loc: Loc, message: str) -> Problem:
        return Problem(self.path, self.line(loc), message)


def _build(node: yaml.Node, loc: Loc, lines: dict[Loc, int], loader: Any, path: str) -> Any:
    lines.setdefault(loc, node.start_mark.line + 1)
    if isinstance(node, yaml.MappingNode):
        out: dict[Any, Any] = {}
        for key_node, value_node in node.value:
            key = loader.construct_object(key_node, deep=True)
            if isinstance(key, list | dict):
                raise ContentError([Problem(path, key_node.start_mark.line + 1, "a key must be a plain value")])
            if key in out:
                raise ContentError(
                    [Problem(path, key_node.start_mark.line + 1, f"duplicate key {key!r} in the same mapping")]
                )
            child = (*loc, key)
            lines[child] = key_node.start_mark.line + 1
            out[key] = _build(value_node, child, lines, loader, path)
        return out
    if isinstance(node, yaml.SequenceNode):
        return [_build(item, (*loc, i), lines, loader, path) for i, item in enumerate(node.value)]
    return loader.construct_object(node, deep=True)


def parse_yaml(text: str, path: str, first_line: int = 1) -> Source:
    """Parse YAML text into a Source; a syntax error is a ContentError."""
    loader = _Loader(text)
    try:
        node = loader.get_single_node()
        lines: dict[Loc, int] = {}
        data = None if node is None else _build(node, (), lines, loader, path)
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        line = (mark.line + 1 if mark else 1) + first_line - 1
        raise ContentError([Problem(path, line, f"YAML syntax: {exc.problem or exc.context}")]) from None
    finally:
        loader.dispose()
    if first_line != 1:
        lines = {k: v + first_line - 1 for k, v in lines.items()}
    lines.setdefault((), first_line)
    return Source(path, data, lines)


def parse_front_matter(text: str, path: str) -> tuple[Source, str, int]:
    """Split a Markdown file into its front matter Source, body and body's first line."""
    all_lines = text.splitlines(keepends=True)
    if not all_lines or all_lines[0].rstrip() != "---":
        raise ContentError([Problem(path, 1, "a Markdown item must start with '---' and YAML front matter")])
    for i in range(1, len(all_lines)):
        if all_lines[i].rstrip() == "---":
            meta = parse_yaml("".join(all_lines[1:i]), path, first_line=2)
            if not isinstance(meta.data, dict):
                raise ContentError([Problem(path, 2, "front matter must be a mapping of fields")])
            body = "".join(all_lines[i + 1 :]).strip("\n")
            return meta, body, i + 2
    raise ContentError([Problem(path, 1, "front matter is not closed by a '---' line")])


def _describe(err: Any) -> str:
    loc = ".".join(str(p) for p in err["loc"])
    kind = err["type"]
    if kind == "extra_forbidden":
        return f"unknown field '{err['loc'][-1]}'"
    if kind == "missing":
        return f"missing field '{loc}'"
    # Our own validators' messages are for authors already; drop pydantic's prefix.
    msg = str(err["msg"]).removeprefix("Value error, ")
    return f"{loc}: {msg}" if loc else msg


def validation_problems(exc: ValidationError, source: Source, prefix: Loc = ()) -> list[Problem]:
    """Turn pydantic's errors into Problems on the lines they refer to."""
    problems = []
    for err in exc.errors():
        loc = tuple(err["loc"])
        problems.append(source.problem((*prefix, *loc), _describe(err)))
    return problems
