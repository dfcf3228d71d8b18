"""The documentation names everything a reader can set or type: a setting, a command, a key.

Each check is a function over a page's text that returns what the page leaves out, so a test fails
naming the item (one test per item) and the last tests show, on a copy of a page with one item cut
out, that the checks do report it. Nothing here builds the site (tests/test_docs_site.py does).

What is enumerated comes from the code, never from a list kept here:
- settings: the fields of ``app.config.Settings`` and ``app.labs.settings.LabSettings``, as their
  environment variables (the classes' ``env_prefix``, or a field's own alias), in
  docs/operators/configuration.md;
- the ``ringlab`` command: every command and group of the real CLI (``typer.main.get_command``), each
  with a heading of its own in docs/reference/cli.md, and every option of it in its section;
- ``lab.yaml``: every field of ``labs.spec.LabSpec`` and the models inside it, in docs/reference/lab-yaml.md;
- quiz, exercise-set, exercise, deck and card files: every field of their models in
  ``app.content.models``, all in docs/reference/content.md (the one page per kind for every kind).
"""

from __future__ import annotations

import re
import typing
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import typer
from pydantic import AliasChoices, BaseModel
from pydantic_settings import BaseSettings

from app.cli.root import app as cli_app
from app.config import Settings
from app.content import models as content_models
from app.labs.settings import LabSettings
from labs.spec import LabSpec

DOCS = Path(__file__).resolve().parents[1] / "docs"
CONFIGURATION = DOCS / "operators" / "configuration.md"
CLI = DOCS / "reference" / "cli.md"
LAB_YAML = DOCS / "reference" / "lab-yaml.md"
CONTENT = DOCS / "reference" / "content.md"

SETTINGS_CLASSES: tuple[type[BaseSettings], ...] = (Settings, LabSettings)
# The file each content model describes, by the name the reference page gives it.
CONTENT_FILES: dict[str, type[BaseModel]] = {
    "quiz": content_models.Quiz,
    "exercise set": content_models.ExerciseSetMeta,
    "exercise": content_models.Exercise,
    "deck": content_models.DeckMeta,
    "card": content_models.Card,
    "course": content_models.CourseContent,
}


# --- what the code defines ---------------------------------------------------------------------


def setting_env_names(cls: type[BaseSettings]) -> list[str]:
    """The environment variable of each field: its alias if it has one, else the class's prefix + its name."""
    prefix = cls.model_config.get("env_prefix", "")
    names = []
    for name, field in cls.model_fields.items():
        alias = field.validation_alias or field.alias
        if isinstance(alias, AliasChoices):
            alias = alias.choices[0]
        names.append(alias if isinstance(alias, str) else f"{prefix}{name}".upper())
    return names


def _models_in(annotation: Any) -> Iterator[type[BaseModel]]:
    """The pydantic models an annotation holds (``list[CheckSpec]``, ``Foo | None``, ``Annotated[...]``)."""
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        yield annotation
        return
    for arg in typing.get_args(annotation):
        yield from _models_in(arg)


def model_keys(model: type[BaseModel]) -> list[str]:
    """Every key a file of this model may hold, nested models' keys included, each once, in field order."""
    keys: list[str] = []
    seen: set[type[BaseModel]] = set()

    def walk(m: type[BaseModel]) -> None:
        if m in seen:
            return
        seen.add(m)
        for name, field in m.model_fields.items():
            key = field.alias if isinstance(field.alias, str) else name
            if key not in keys:
                keys.append(key)
            for inner in _models_in(field.annotation):
                walk(inner)

    walk(model)
    return keys


def cli_commands() -> dict[str, list[str]]:
    """``{"ringlab db upgrade": ["--option", ...]}`` for the root, every group and every command."""
    found: dict[str, list[str]] = {}

    def walk(command: Any, path: str) -> None:
        options = [
            opt
            for param in command.params
            if param.param_type_name == "option"
            for opt in (*param.opts, *param.secondary_opts)
            if opt.startswith("--")
        ]
        found[path] = options
        for name, sub in getattr(command, "commands", {}).items():
            walk(sub, f"{path} {name}")

    walk(typer.main.get_command(cli_app), "ringlab")
    return found


# --- the checks: each takes a page's text and returns what it leaves out -------------------------


def missing_env_names(text: str, names: list[str]) -> list[str]:
    """Settings the page does not name as `` `VARIABLE` ``."""
    return [name for name in names if f"`{name}`" not in text]


def missing_keys(text: str, keys: list[str]) -> list[str]:
    """Keys the page does not name as `` `key` ``."""
    return [key for key in keys if f"`{key}`" not in text]


HEADING = re.compile(r"^#{2,6} `(ringlab(?: [a-z-]+)*)`\s*$", re.MULTILINE)


def command_sections(text: str) -> dict[str, str]:
    """Each command heading (``## `ringlab db upgrade` ``) and the text up to the next one."""
    marks = list(HEADING.finditer(text))
    ends = [m.start() for m in marks[1:]] + [len(text)]
    return {m.group(1): text[m.end() : end] for m, end in zip(marks, ends, strict=True)}


def missing_cli(text: str, commands: dict[str, list[str]]) -> list[str]:
    """Commands without a heading of their own, and options their section does not name as `` `--option` ``
    (or inside a backticked usage line such as `` `--world-sizes 2,3,4` ``)."""
    sections = command_sections(text)
    problems = []
    for command, options in commands.items():
        if command not in sections:
            problems.append(command)
            continue
        for option in options:
            if not re.search(rf"`[^`\n]*{re.escape(option)}(?![\w-])[^`\n]*`", sections[command]):
                problems.append(f"{command} {option}")
    return problems


# --- one test per item ----------------------------------------------------------------------------


def _read(page: Path) -> str:
    return page.read_text(encoding="utf-8")


SETTINGS = [(cls.__name__, name) for cls in SETTINGS_CLASSES for name in setting_env_names(cls)]


@pytest.mark.parametrize(("cls", "name"), SETTINGS, ids=[name for _, name in SETTINGS])
def test_every_setting_is_documented(cls: str, name: str) -> None:
    assert missing_env_names(_read(CONFIGURATION), [name]) == [], (
        f"{cls}'s {name} is not in {CONFIGURATION.relative_to(DOCS.parent)}: add a row for it (default, meaning)"
    )


COMMANDS = cli_commands()
OPTIONS = [(command, option) for command, options in COMMANDS.items() for option in options]


@pytest.mark.parametrize("command", list(COMMANDS))
def test_every_command_has_a_section(command: str) -> None:
    assert command in command_sections(_read(CLI)), (
        f"{command} has no heading '## `{command}`' in {CLI.relative_to(DOCS.parent)}"
    )


@pytest.mark.parametrize(("command", "option"), OPTIONS, ids=[f"{c} {o}" for c, o in OPTIONS])
def test_every_option_is_documented(command: str, option: str) -> None:
    assert missing_cli(_read(CLI), {command: [option]}) == [], (
        f"{command} {option} is not named in that command's section of {CLI.relative_to(DOCS.parent)}"
    )


@pytest.mark.parametrize("key", model_keys(LabSpec))
def test_every_lab_yaml_key_is_documented(key: str) -> None:
    assert missing_keys(_read(LAB_YAML), [key]) == [], f"lab.yaml's `{key}` is not in {LAB_YAML.name}"


CONTENT_KEYS = [(kind, key) for kind, model in CONTENT_FILES.items() for key in model_keys(model)]


@pytest.mark.parametrize(("kind", "key"), CONTENT_KEYS, ids=[f"{k}:{key}" for k, key in CONTENT_KEYS])
def test_every_content_key_is_documented(kind: str, key: str) -> None:
    assert missing_keys(_read(CONTENT), [key]) == [], f"the {kind} file's `{key}` is not in {CONTENT.name}"


def _nested(models: set[type[BaseModel]]) -> set[type[BaseModel]]:
    found = set(models)
    while True:
        more = {i for m in found for f in m.model_fields.values() for i in _models_in(f.annotation)} - found
        if not more:
            return found
        found |= more


def test_content_kinds_are_every_file_model() -> None:
    """A new kind of content file (a model the loader validates a file with) needs its entry in CONTENT_FILES."""
    defined = {
        m
        for m in vars(content_models).values()
        if isinstance(m, type) and issubclass(m, BaseModel) and m.__module__ == content_models.__name__
    }
    # Trees and folders the loader assembles from the file models; a base class; labs are lab.yaml's.
    not_files = {content_models.ContentTree, content_models.ExerciseSet, content_models.Deck}
    not_files |= {content_models.Strict, content_models.LabContent}
    assert defined - _nested(set(CONTENT_FILES.values())) - not_files == set()


# --- the checks can fail ----------------------------------------------------------------------------


def test_a_missing_setting_is_reported() -> None:
    text = _read(CONFIGURATION)
    assert missing_env_names(text, ["RINGLAB_JOIN_CODE"]) == []
    cut = text.replace("`RINGLAB_JOIN_CODE`", "the join code")
    assert missing_env_names(cut, ["RINGLAB_JOIN_CODE"]) == ["RINGLAB_JOIN_CODE"]


def test_a_missing_command_or_option_is_reported() -> None:
    text = _read(CLI)
    wanted = {"ringlab lab new": ["--world-sizes"], "ringlab db backup": []}
    assert missing_cli(text, wanted) == []
    no_option = re.sub(r"--world-sizes\b", "--sizes", text)
    assert missing_cli(no_option, wanted) == ["ringlab lab new --world-sizes"]
    no_heading = text.replace("## `ringlab db backup`", "## Backing up")
    assert missing_cli(no_heading, wanted) == ["ringlab db backup"]


def test_a_missing_key_is_reported() -> None:
    text = _read(LAB_YAML)
    assert missing_keys(text, ["hint_after"]) == []
    assert missing_keys(text.replace("`hint_after`", "hint_after"), ["hint_after"]) == ["hint_after"]
    content = _read(CONTENT)
    assert missing_keys(content.replace("`rating_labels`", "the labels"), ["rating_labels"]) == ["rating_labels"]


def test_the_enumerations_find_what_they_should() -> None:
    """Guards against a check that passes because it enumerates nothing."""
    assert "DATABASE_URL" in setting_env_names(Settings)
    assert "RINGLAB_WORKER_NICE" in setting_env_names(LabSettings)
    assert "--world-sizes" in COMMANDS["ringlab lab new"]
    assert "--no-record" in COMMANDS["ringlab lab test"]
    assert "ringlab content check" in COMMANDS
    assert {"allow", "hints", "cards", "world_sizes"} <= set(model_keys(LabSpec))
    assert {"recommendation", "key", "in_source"} <= set(model_keys(content_models.Quiz))
