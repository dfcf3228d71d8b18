"""Rules that span items: references, scoring tiers, Markdown that renders.

Each function is pure over validated models and returns Problems; the loader
decides where they came from.
"""

from __future__ import annotations

import re
from collections.abc import Iterator

from app.content.check_cache import CheckCache
from app.content.errata import Corrected, corrected_text, erratum_fields, same_text
from app.content.models import ContentTree, Erratum, Exercise, ExerciseSetMeta, Question, Quiz, Section
from app.content.source import Problem, Source

Where = dict[tuple[str, str], tuple[Source, tuple[str | int, ...]]]
"""(kind, id) -> the file an item is defined in and the path of the item inside it."""
OPTION_KEY = re.compile(r"^[A-Z]$")


def number_key(number: str) -> tuple[int | str, ...]:
    """Sort "35.10" after "35.9"."""
    return tuple(int(p) if p.isdigit() else p for p in re.split(r"[.\s]", number))


def tier_problems(tiers: list[tuple[int, int]], max_score: int) -> list[tuple[int, str]]:
    """Check that tiers cover 0..max_score exactly once. Returns (tier index, message)."""
    out: list[tuple[int, str]] = []
    for i, (lo, hi) in enumerate(tiers):
        if lo > hi:
            out.append((i, f"tier {lo}-{hi}: min is greater than max"))
        if hi > max_score:
            out.append((i, f"tier {lo}-{hi} goes past the highest possible score {max_score}"))
    if out:
        return out
    order = sorted(range(len(tiers)), key=lambda i: tiers[i])
    expected = 0
    for i in order:
        lo, hi = tiers[i]
        if lo > expected:
            out.append((i, f"scoring tiers leave a gap: no tier covers score {expected}-{lo - 1}"))
        elif lo < expected:
            out.append((i, f"scoring tiers overlap at score {lo}-{min(hi, expected - 1)}"))
        expected = max(expected, hi + 1)
    if expected <= max_score:
        out.append((order[-1], f"scoring tiers leave a gap: no tier covers score {expected}-{max_score}"))
    return out


def check_quiz(quiz: Quiz, source: Source) -> list[Problem]:
    problems = check_sections(quiz.sections, source)
    for i, q in enumerate(quiz.questions):
        problems.extend(check_question(q, i, quiz.sections, source))
    if quiz.show_answers == "after_due" and quiz.due is None:
        problems.append(
            source.problem(("show_answers",), "show_answers: after_due needs a due date: add 'due: 2026-12-01'")
        )
    tiers = [(t.min, t.max) for t in quiz.scoring_guide]
    for i, message in tier_problems(tiers, len(quiz.questions)) if tiers else []:
        problems.append(source.problem(("scoring_guide", i), message))
    return problems


def check_sections(sections: list[Section], source: Source) -> list[Problem]:
    problems: list[Problem] = []
    section_ids = [s.id for s in sections]
    for i, section in enumerate(sections):
        if section.id in section_ids[:i]:
            problems.append(source.problem(("sections", i, "id"), f"duplicate section id '{section.id}'"))
    return problems


def check_question(q: Question, i: int, sections: list[Section], source: Source) -> list[Problem]:
    """The rules of question ``i`` of a quiz: its option keys, its answer, its section."""
    problems: list[Problem] = []
    section_ids = [s.id for s in sections]
    at = ("questions", i)
    keys = [o.key for o in q.options]
    for j, key in enumerate(keys):
        if not OPTION_KEY.match(key):
            problems.append(source.problem((*at, "options"), f"{q.id}: option key '{key}' must be one capital letter"))
        elif key in keys[:j]:
            problems.append(source.problem((*at, "options"), f"{q.id}: duplicate option key '{key}'"))
    if q.answer not in keys:
        problems.append(
            source.problem((*at, "answer"), f"{q.id}: answer '{q.answer}' is not among the options {', '.join(keys)}")
        )
    problems.extend(check_errata(q, source, at))
    if sections and q.section is None:
        problems.append(source.problem(at, f"{q.id}: missing field 'section' (the quiz has sections)"))
    elif q.section is not None and q.section not in section_ids:
        problems.append(source.problem((*at, "section"), f"{q.id}: unknown section '{q.section}'"))
    return problems


def check_exercise_set(
    meta: ExerciseSetMeta, source: Source, exercises: list[tuple[Exercise, Source]]
) -> list[Problem]:
    problems: list[Problem] = []
    section_ids = {s.id for s in meta.sections}
    numbers: dict[str, str] = {}
    for exercise, where in exercises:
        if exercise.section is not None and exercise.section not in section_ids:
            problems.append(
                where.problem(("section",), f"unknown section '{exercise.section}' (set.yaml lists the sections)")
            )
        if (
            meta.difficulty_legend
            and exercise.difficulty is not None
            and exercise.difficulty not in meta.difficulty_legend
        ):
            problems.append(
                where.problem(("difficulty",), f"difficulty {exercise.difficulty} is not in the set's legend")
            )
        if exercise.number in numbers:
            problems.append(
                where.problem(("number",), f"exercise number {exercise.number} also used in {numbers[exercise.number]}")
            )
        numbers.setdefault(exercise.number, where.path)
        problems.extend(check_errata(exercise, where))
        problems.extend(check_parts(exercise, where))
    return problems


def check_parts(exercise: Exercise, where: Source) -> list[Problem]:
    """Answer parts: ids unique in the exercise, a tolerance that cannot accept a wrong answer of 0."""
    problems: list[Problem] = []
    seen: set[str] = set()
    for i, part in enumerate(exercise.parts):
        if part.id in seen:
            problems.append(where.problem(("parts", i, "id"), f"duplicate part id '{part.id}' in {exercise.id}"))
        seen.add(part.id)
        problems.extend(check_errata(part, where, ("parts", i)))
        error = (
            abs(part.value) * float(part.tolerance.rstrip("%")) / 100
            if isinstance(part.tolerance, str)
            else part.tolerance
        )
        if part.value != 0 and error >= abs(part.value):
            problems.append(
                where.problem(
                    ("parts", i, "tolerance"),
                    f"part '{part.id}': tolerance {part.tolerance} would accept 0 for a value of {part.value:g}",
                )
            )
        if part.hint is not None and hint_gives_value(part.hint, part.value, f"{exercise.body}\n{part.prompt}"):
            problems.append(
                where.problem(
                    ("parts", i, "hint"),
                    f"part '{part.id}': the hint states the answer {part.value:g}; "
                    "a hint points to the method and leaves the number to the student",
                )
            )
    return problems


def _written_forms(value: float) -> set[str]:
    forms = {f"{value:g}", f"{value:,g}", repr(value)}
    if float(value).is_integer():
        forms |= {str(int(value)), f"{int(value):,}"}
    return {f for f in forms if "e" not in f}


def _mentions(text: str, form: str) -> bool:
    # The number standing alone: not a piece of a longer number (2048 in 20480 or 1.2048).
    return re.search(rf"(?<![\d.,]){re.escape(form)}(?![\d]|[.,]\d)", text) is not None


def hint_gives_value(hint: str, value: float, context: str) -> bool:
    """Whether ``hint`` writes out the part's ``value``, which neither the exercise nor the prompt already gives."""
    return any(_mentions(hint, form) and not _mentions(context, form) for form in _written_forms(value))


def check_errata(item: Corrected, source: Source, at: tuple[str | int, ...] = ()) -> list[Problem]:
    """Each erratum names a field the item has, once, and records a real change of it."""
    problems: list[Problem] = []
    allowed = erratum_fields(item)
    seen: set[str] = set()
    errata: list[Erratum] = item.errata
    for i, erratum in enumerate(errata):
        loc = (*at, "errata", i, "field")
        if erratum.field not in allowed:
            problems.append(source.problem(loc, f"erratum field '{erratum.field}' is not one of {', '.join(allowed)}"))
            continue
        if erratum.field in seen:
            problems.append(source.problem(loc, f"a second erratum for '{erratum.field}': write one per field"))
        seen.add(erratum.field)
        if same_text(erratum.source, corrected_text(item, erratum.field)):
            problems.append(
                source.problem(
                    (*at, "errata", i, "source"),
                    f"the erratum for '{erratum.field}' gives the text the item has now as its source: "
                    "'source' is what the source document said before the correction",
                )
            )
    return problems


def check_references(tree: ContentTree, where: Where) -> list[Problem]:
    card_ids = {card.id for deck in tree.decks for card in deck.cards}
    problems = []
    for quiz in tree.quizzes:
        for q in quiz.questions:
            for card_id in q.cards:
                if card_id not in card_ids:
                    source, loc = where[("question", q.id)]
                    problems.append(source.problem((*loc, "cards"), f"{q.id}: unknown card '{card_id}' in cards"))
    return problems


def markdown_fields(tree: ContentTree) -> Iterator[tuple[tuple[str, str], tuple[str | int, ...], str]]:
    """Every Markdown field in the tree as ((kind, id), path of the field inside the item, text)."""
    for quiz in tree.quizzes:
        yield ("quiz", quiz.id), ("description",), quiz.description
        for i, tier in enumerate(quiz.scoring_guide):
            yield ("quiz", quiz.id), ("scoring_guide", i, "recommendation"), tier.recommendation
        for q in quiz.questions:
            yield ("question", q.id), ("prompt",), q.prompt
            for o in q.options:
                yield ("question", q.id), ("options", o.key), o.text
            yield ("question", q.id), ("explanation",), q.explanation
    for ex_set in tree.exercise_sets:
        yield ("exercise set", ex_set.id), ("description",), ex_set.description
        for ex in ex_set.exercises:
            yield ("exercise", ex.id), ("body",), ex.body
            for i, part in enumerate(ex.parts):
                yield ("exercise", ex.id), ("parts", i, "prompt"), part.prompt
                yield ("exercise", ex.id), ("parts", i, "explanation"), part.explanation
                if part.hint is not None:
                    yield ("exercise", ex.id), ("parts", i, "hint"), part.hint
    for deck in tree.decks:
        yield ("deck", deck.id), ("description",), deck.description
        for card in deck.cards:
            yield ("card", card.id), ("front",), card.front
            yield ("card", card.id), ("back",), card.back
    for key, item in _corrected_items(tree):
        for at, erratum in item:
            yield key, (*at, "note"), erratum.note


def _corrected_items(
    tree: ContentTree,
) -> Iterator[tuple[tuple[str, str], list[tuple[tuple[str | int, ...], Erratum]]]]:
    for quiz in tree.quizzes:
        for q in quiz.questions:
            yield ("question", q.id), [(("errata", i), e) for i, e in enumerate(q.errata)]
    for ex_set in tree.exercise_sets:
        for ex in ex_set.exercises:
            found: list[tuple[tuple[str | int, ...], Erratum]] = [(("errata", i), e) for i, e in enumerate(ex.errata)]
            for p, part in enumerate(ex.parts):
                found += [(("parts", p, "errata", i), e) for i, e in enumerate(part.errata)]
            yield ("exercise", ex.id), found
    for deck in tree.decks:
        for card in deck.cards:
            yield ("card", card.id), [(("errata", i), e) for i, e in enumerate(card.errata)]


def check_markdown(tree: ContentTree, where: Where, cache: CheckCache | None = None) -> list[Problem]:
    problems = []
    for key, field, text in markdown_fields(tree):
        if "$" not in text:
            continue  # only math (bad LaTeX, a stray `$`) can fail to render: markdown.check passes the rest
        digest = CheckCache.key("markdown", text) if cache else ""
        found = cache.get(digest) if digest and cache else None  # [] or [the error]
        if found is None:
            from app.content import markdown  # only for a text the cache has not seen: the check starts without it

            try:
                markdown.check(text)
                found = []
            except markdown.MarkdownError as exc:
                found = [str(exc)]
            if digest and cache:
                cache.put(digest, found)
        for error in found:
            source, loc = where[key]
            name = ".".join(str(p) for p in field)
            problems.append(source.problem((*loc, *field), f"{key[0]} {key[1]} {name}: {error}"))
    return problems
