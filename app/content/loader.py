"""Load a content directory into validated models, collecting every problem.

Layout (see docs/instructors/content.md and docs/reference/content.md):

    quizzes/<quiz>.yaml
    exercises/<set>/set.yaml  +  exercises/<set>/*.md   (one exercise each)
    decks/<deck>/deck.yaml    +  decks/<deck>/cards/*.md (one card each)
    labs/<lab>/               (grading worker labs)
    courses/<course>/course.yaml (course instances: dates and what they assign)
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, TypeVar

from pydantic import BaseModel, ValidationError

from app.content import rules
from app.content.check_cache import CheckCache
from app.content.courses import load_courses
from app.content.lab_order import check_after
from app.content.labs import load_lab_content
from app.content.models import (
    Card,
    ContentTree,
    Deck,
    DeckMeta,
    Exercise,
    ExerciseSet,
    ExerciseSetMeta,
    LabContent,
    Question,
    Quiz,
    Section,
)  # fmt: skip
from app.content.source import ContentError, Problem, Source, parse_front_matter, parse_yaml, validation_problems

IGNORED_NAMES = {"README.md", ".gitkeep"}
M = TypeVar("M", bound=BaseModel)
Member = TypeVar("Member", Exercise, Card)


class _Collector:
    """Gathers problems across files so one run reports all of them."""

    def __init__(self, root: Path):
        self.root = root
        self.problems: list[Problem] = []
        self.where: rules.Where = {}

    def locate(self, kind: str, item_id: str, source: Source, loc: tuple[Any, ...] = ()) -> None:
        """Remember where an item is defined; a second definition is a problem."""
        first = self.where.setdefault((kind, item_id), (source, loc))
        if first[0] is not source or first[1] != loc:
            there = f"{first[0].path}:{first[0].line(first[1])}"
            self.problems.append(source.problem(loc, f"duplicate {kind} id '{item_id}' (first defined at {there})"))

    def rel(self, path: Path) -> str:
        try:
            return str(path.relative_to(self.root.parent))
        except ValueError:
            return str(path)

    def read(self, path: Path) -> str | None:
        try:
            return path.read_text(encoding="utf-8")
        except UnicodeDecodeError as exc:
            self.problems.append(Problem(self.rel(path), 1, f"not UTF-8 text ({exc.reason})"))
        except OSError as exc:
            self.problems.append(Problem(self.rel(path), 1, f"cannot read: {exc.strerror}"))
        return None

    def yaml(self, path: Path) -> Source | None:
        text = self.read(path)
        if text is None:
            return None
        try:
            source = parse_yaml(text, self.rel(path))
        except ContentError as exc:
            self.problems.extend(exc.problems)
            return None
        if not isinstance(source.data, dict):
            self.problems.append(source.problem((), "expected a mapping of fields at the top of the file"))
            return None
        return source

    def validate(self, model: type[M], source: Source, data: Any) -> M | None:
        try:
            return model.model_validate(data)
        except ValidationError as exc:
            self.problems.extend(validation_problems(exc, source))
            return None


def _load_quiz(c: _Collector, path: Path) -> Quiz | None:
    source = c.yaml(path)
    if source is None:
        return None
    quiz = c.validate(Quiz, source, source.data)
    if quiz is not None:
        c.locate("quiz", quiz.id, source)
        for i, question in enumerate(quiz.questions):
            c.locate("question", question.id, source, ("questions", i))
        c.problems.extend(rules.check_quiz(quiz, source))
    else:
        _salvage_quiz(c, source)
    return quiz


def _salvage_quiz(c: _Collector, source: Source) -> None:
    """A quiz that failed its schema: still report what can be told of the parts that pass.

    So one run shows every problem of the file: its ids (duplicates), and the rules of each
    section and question that validates on its own. Nothing of it is loaded.
    """
    data = source.data
    if isinstance(data.get("id"), str):
        c.locate("quiz", data["id"], source)
    raw_sections = data.get("sections") if isinstance(data.get("sections"), list) else []
    raw_questions = data.get("questions") if isinstance(data.get("questions"), list) else []
    sections = [s for raw in raw_sections if (s := _quietly(Section, raw)) is not None]
    questions = [_quietly(Question, raw) for raw in raw_questions]
    for i, (raw, question) in enumerate(zip(raw_questions, questions, strict=True)):
        if question is not None:
            c.locate("question", question.id, source, ("questions", i))
        elif isinstance(raw, dict) and isinstance(raw.get("id"), str):
            c.locate("question", raw["id"], source, ("questions", i))
    c.problems.extend(rules.check_sections(sections, source))
    if len(sections) == len(raw_sections):  # else a question's section may be one that failed
        for i, question in enumerate(questions):
            if question is not None:
                c.problems.extend(rules.check_question(question, i, sections, source))


def _quietly(model: type[M], data: Any) -> M | None:
    try:
        return model.model_validate(data)
    except ValidationError:
        return None  # its problems are reported by the whole file's validation


def _markdown_item(c: _Collector, path: Path, body_field: str) -> tuple[Source, dict[str, Any]] | None:
    text = c.read(path)
    if text is None:
        return None
    try:
        meta, body, body_line = parse_front_matter(text, c.rel(path))
    except ContentError as exc:
        c.problems.extend(exc.problems)
        return None
    if body_field in meta.data:
        c.problems.append(meta.problem((body_field,), f"'{body_field}' is the Markdown after the front matter"))
        return None
    meta.lines[(body_field,)] = body_line
    return meta, {**meta.data, body_field: body}


def _load_folder(
    c: _Collector, meta_file: Path, meta_model: type[M], items: list[Path], item_model: type[Member], kind: str,
    body_field: str, meta_kind: str,
) -> tuple[M, Source, list[tuple[Member, Source]]] | None:  # fmt: skip
    """A folder item: a YAML file describing it and one Markdown file per member."""
    meta_source = c.yaml(meta_file)
    meta = c.validate(meta_model, meta_source, meta_source.data) if meta_source else None
    if meta_source is not None and isinstance(meta_source.data.get("id"), str):
        c.locate(meta_kind, meta_source.data["id"], meta_source)  # also when the schema fails
    members: list[tuple[Member, Source]] = []
    for path in items:
        item = _markdown_item(c, path, body_field)
        member = c.validate(item_model, *item) if item else None
        if item and member is not None:
            c.locate(kind, member.id, item[0])
            members.append((member, item[0]))
        elif item and isinstance(item[1].get("id"), str):
            c.locate(kind, item[1]["id"], item[0])  # a duplicate id is reported with the schema problems
    if meta is None or meta_source is None:
        return None
    return meta, meta_source, members


def _load_exercise_set(c: _Collector, folder: Path) -> ExerciseSet | None:
    loaded = _load_folder(
        c,
        folder / "set.yaml",
        ExerciseSetMeta,
        sorted(folder.glob("*.md")),
        Exercise,
        "exercise",
        "body",
        "exercise set",
    )
    if loaded is None:
        return None
    meta, source, exercises = loaded
    c.problems.extend(rules.check_exercise_set(meta, source, exercises))
    ordered = sorted((e for e, _ in exercises), key=lambda e: rules.number_key(e.number))
    return ExerciseSet(**meta.model_dump(), exercises=ordered)


def _load_deck(c: _Collector, folder: Path) -> Deck | None:
    cards = sorted((folder / "cards").glob("*.md"))
    loaded = _load_folder(c, folder / "deck.yaml", DeckMeta, cards, Card, "card", "back", "deck")
    if loaded is None:
        return None
    meta, _, members = loaded
    for card, where in members:
        c.problems.extend(rules.check_errata(card, where))
    ordered = sorted((card for card, _ in members), key=lambda card: (card.number is None, card.number or 0, card.id))
    return Deck(**meta.model_dump(), cards=ordered)


def _unexpected(c: _Collector, root: Path) -> None:
    expected_dirs = {"quizzes", "exercises", "decks", "labs", "courses"}
    for entry in sorted(root.iterdir()):
        if entry.name in IGNORED_NAMES or entry.name.startswith("."):
            continue
        if not (entry.is_dir() and entry.name in expected_dirs):
            c.problems.append(
                Problem(
                    c.rel(entry), 1, "unexpected entry: content holds quizzes/, exercises/, decks/, labs/ and courses/"
                )
            )


def load_tree(root: Path, *, check_markdown: bool = True, cache: CheckCache | None = None) -> ContentTree:
    """Load and validate every item under ``root``.

    Raises ContentError listing every problem found, each as ``path:line: message``. ``cache``: where the
    slow, pure checks find what they found last time for the same texts (``ringlab content check``'s).
    """
    root = Path(root)
    if not root.is_dir():
        raise ContentError([Problem(str(root), 1, "content directory not found")])
    c = _Collector(root)
    _unexpected(c, root)
    quizzes = [q for p in sorted((root / "quizzes").glob("*.yaml")) if (q := _load_quiz(c, p))]
    sets = [s for d in _subdirs(root / "exercises") if (s := _load_exercise_set(c, d))]
    decks = [d for f in _subdirs(root / "decks") if (d := _load_deck(c, f))]
    card_ids = {card.id for d in decks for card in d.cards}
    labs = _load_labs(c, root / "labs", {e.id for s in sets for e in s.exercises}, card_ids, cache)
    tree = ContentTree(quizzes=quizzes, exercise_sets=sets, decks=decks, labs=labs)
    courses, problems = load_courses(root, c.rel, tree)
    c.problems.extend(problems)
    tree = tree.model_copy(update={"courses": courses})
    c.problems.extend(rules.check_references(tree, c.where))
    if check_markdown:
        c.problems.extend(rules.check_markdown(tree, c.where, cache))
    if c.problems:
        raise ContentError(c.problems)
    return tree


def _load_labs(
    c: _Collector, root: Path, exercise_ids: set[str], card_ids: set[str], cache: CheckCache | None = None
) -> list[LabContent]:
    """Each lab folder: its lab.yaml, its files, Python that parses, the exercise it names and the labs
    it comes after."""
    labs = []
    # As labs.spec.load_labs: a folder named ``_...`` is no lab (``_common/`` holds the helpers labs share).
    folders = [folder for folder in _subdirs(root) if not folder.name.startswith((".", "_"))]
    for folder in folders:
        lab, problems = load_lab_content(folder, c.rel, exercise_ids, card_ids, cache)
        c.problems.extend(problems)
        if lab is not None:
            labs.append(lab)
    known = {folder.name for folder in folders}
    c.problems.extend(check_after(labs, known, lambda lab_id: c.rel(root / lab_id / "lab.yaml")))
    return labs


def _subdirs(path: Path) -> list[Path]:
    return sorted(p for p in path.iterdir() if p.is_dir()) if path.is_dir() else []
