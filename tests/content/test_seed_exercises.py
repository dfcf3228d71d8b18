"""The ch35 and ch26 exercise sets say exactly what their seed documents say.

The seeds are parsed here, independently of the content files, and every
exercise's number, title, section, difficulty and body is compared with them,
as the seed printed them: an item that carries errata is compared through
``as_in_source``, and every erratum's ``source`` must be the seed's own text.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from app.content import markdown
from app.content.errata import as_in_source
from app.content.models import ContentTree, ExerciseSet

CH35_SEED = "002_5d6aa88dd961c066.txt"
CH26_SEED = "003_e725e3b7f745518c.txt"
CONTENT_EXERCISES = Path(__file__).resolve().parents[2] / "content" / "exercises"

# Extraction damage in the ch26 seed, repaired in the content: inline code was
# flattened and lost the spaces around it ("Use\nDistributedSamplerwith ...").
# Applied to the seed's text before comparing; nothing else is excused.
SEED_REPAIRS: dict[str, list[tuple[str, str]]] = {
    "26.24": [
        ("DistributedSamplerwith correctset_epoch()calls.", "DistributedSampler with correct set_epoch() calls."),
        ("GradScaler(for FP16) orautocast(for BF16).", "GradScaler (for FP16) or autocast (for BF16)."),
    ],
}

EXERCISE_35 = re.compile(r"^Exercise (35\.\d+): (.+)$")
SECTION_35 = re.compile(r"^Section \d+: (.+)$")
EXERCISE_26 = re.compile(r"^Exercise (26\.\d+) \((\*+)\)$")
LEGEND_ITEM = re.compile(r"\s*-\s*(?:One|Two|Three|Four) stars? \((\*+)\):\s*")
MATH = re.compile(r"(?<!\\)\$\$.+?\$\$|(?<!\\)\$.+?(?<!\\)\$", re.DOTALL)
MD_ESCAPE = re.compile(r"\\([!-/:-@\[-`{-~])")


@dataclass
class SeedExercise:
    number: str
    title: str | None
    section: str
    difficulty: int | None = None
    lines: list[str] = field(default_factory=list)

    @property
    def text(self) -> str:
        return "\n".join(self.lines)


@dataclass
class Seed:
    title: str
    sections: list[str]
    exercises: list[SeedExercise]
    intro: str = ""
    legend: dict[int, str] = field(default_factory=dict)

    def by_number(self) -> dict[str, SeedExercise]:
        return {e.number: e for e in self.exercises}


def _lines(path: Path) -> list[str]:
    return [line.rstrip() for line in path.read_text(encoding="utf-8").splitlines()]


def parse_ch35(path: Path) -> Seed:
    lines = _lines(path)
    seed = Seed(title=lines[0].strip(), sections=[], exercises=[])
    for line in lines[1:]:
        if m := SECTION_35.match(line):
            seed.sections.append(m.group(1).strip())
        elif m := EXERCISE_35.match(line):
            seed.exercises.append(SeedExercise(m.group(1), m.group(2).strip(), seed.sections[-1]))
        elif line.strip():
            seed.exercises[-1].lines.append(line)
    return seed


def _is_heading(line: str) -> bool:
    return bool(line) and not line.startswith(("-", "|", "(")) and not line.endswith((".", "?", ":", ")", "|"))


def parse_ch26(path: Path) -> Seed:
    lines = [line for line in _lines(path) if line.strip()]
    parts = LEGEND_ITEM.split(lines[1])
    seed = Seed(title=lines[0].strip(), sections=[], exercises=[], intro=parts[0].strip())
    seed.legend = {len(stars): text.strip() for stars, text in zip(parts[1::2], parts[2::2], strict=True)}
    body = lines[2:]
    for i, line in enumerate(body):
        if m := EXERCISE_26.match(line):
            seed.exercises.append(SeedExercise(m.group(1), None, seed.sections[-1], len(m.group(2))))
        elif i + 1 < len(body) and EXERCISE_26.match(body[i + 1]) and _is_heading(line):
            seed.sections.append(line.strip())
        else:
            seed.exercises[-1].lines.append(line)
    return seed


def normalise_seed(number: str, text: str) -> str:
    for old, new in SEED_REPAIRS.get(number, []):
        assert old in text, f"{number}: expected seed damage {old!r} not found"
        text = text.replace(old, new)
    return " ".join(text.split())


def normalise_body(body: str) -> str:
    """Strip Markdown escapes and code backticks outside math, then collapse whitespace."""
    out, pos = [], 0
    for m in MATH.finditer(body):
        out.append(MD_ESCAPE.sub(r"\1", body[pos : m.start()]).replace("`", ""))
        out.append(m.group(0))
        pos = m.end()
    out.append(MD_ESCAPE.sub(r"\1", body[pos:]).replace("`", ""))
    return " ".join("".join(out).split())


@pytest.fixture(scope="module")
def seed35(seeds_dir: Path) -> Seed:
    return parse_ch35(seeds_dir / CH35_SEED)


@pytest.fixture(scope="module")
def seed26(seeds_dir: Path) -> Seed:
    return parse_ch26(seeds_dir / CH26_SEED)


def _set(tree: ContentTree, set_id: str) -> ExerciseSet:
    found = [s for s in tree.exercise_sets if s.id == set_id]
    assert len(found) == 1, f"exercise set {set_id} not found exactly once"
    return found[0]


@pytest.fixture(scope="module")
def set35(content_tree: ContentTree) -> ExerciseSet:
    return _set(content_tree, "ch35-exercises")


@pytest.fixture(scope="module")
def set26(content_tree: ContentTree) -> ExerciseSet:
    return _set(content_tree, "ch26-exercises")


def _section_titles(ex_set: ExerciseSet) -> dict[str, str]:
    return {s.id: s.title for s in ex_set.sections}


# ---------------------------------------------------------------- seed parsing


def test_seed_parsers_find_everything(seed35: Seed, seed26: Seed) -> None:
    assert [e.number for e in seed35.exercises] == [f"35.{n}" for n in range(1, 25)]
    assert len(seed35.sections) == 6
    assert [e.number for e in seed26.exercises] == [f"26.{n}" for n in range(1, 28)]
    assert len(seed26.sections) == 8
    assert seed26.sections[0] == "Data Parallelism and Gradient Synchronization"
    assert sorted(seed26.legend) == [1, 2, 3, 4]
    assert all(e.lines for e in seed35.exercises + seed26.exercises)


# ---------------------------------------------------------------- ch35


def test_ch35_set(set35: ExerciseSet, seed35: Seed) -> None:
    assert set35.title == seed35.title == "Chapter 35: Exercises -- Distributed Training and Scaling"
    assert [s.title for s in set35.sections] == seed35.sections
    assert not set35.difficulty_legend


def test_ch35_counts(set35: ExerciseSet, seed35: Seed) -> None:
    numbers = [e.number for e in set35.exercises]
    assert len(numbers) == 24
    assert sorted(numbers) == sorted(f"35.{n}" for n in range(1, 25))
    assert len(set(numbers)) == len(numbers)
    titles = _section_titles(set35)
    per_section = {
        title: sum(titles.get(e.section or "") == title for e in set35.exercises) for title in seed35.sections
    }
    expected = {title: sum(e.section == title for e in seed35.exercises) for title in seed35.sections}
    assert per_section == expected
    assert list(expected.values()) == [3, 5, 3, 4, 3, 6]


def test_ch35_titles_and_sections(set35: ExerciseSet, seed35: Seed) -> None:
    titles = _section_titles(set35)
    seed = seed35.by_number()
    for ex in set35.exercises:
        assert ex.id == f"ex-{ex.number.replace('.', '-')}"
        assert as_in_source(ex).title == seed[ex.number].title, ex.number
        assert ex.section is not None and titles[ex.section] == seed[ex.number].section, ex.number
        assert ex.difficulty is None


def test_ch35_file_names(seed35: Seed) -> None:
    names = sorted(p.name for p in (CONTENT_EXERCISES / "ch35-exercises").glob("*.md"))
    expected = []
    for e in seed35.exercises:
        n = int(e.number.split(".")[1])
        expected.append(f"35-{n:02d}-{re.sub(r'[^a-z0-9]+', '-', (e.title or '').lower()).strip('-')}.md")
    assert names == sorted(expected)


# ---------------------------------------------------------------- ch26


def test_ch26_set(set26: ExerciseSet, seed26: Seed) -> None:
    assert set26.title == seed26.title == "Chapter 26: Exercises"
    assert set26.description == seed26.intro == "Exercises are graded by difficulty:"
    assert [s.title for s in set26.sections] == seed26.sections
    assert set26.difficulty_legend == seed26.legend


def test_ch26_counts(set26: ExerciseSet) -> None:
    numbers = [e.number for e in set26.exercises]
    assert len(numbers) == 27
    assert sorted(numbers) == sorted(f"26.{n}" for n in range(1, 28))
    assert len(set(numbers)) == len(numbers)


def test_ch26_difficulty_and_section(set26: ExerciseSet, seed26: Seed) -> None:
    titles = _section_titles(set26)
    seed = seed26.by_number()
    for ex in set26.exercises:
        assert ex.id == f"ex-{ex.number.replace('.', '-')}"
        assert as_in_source(ex).title is None, ex.number
        assert ex.difficulty == seed[ex.number].difficulty, ex.number
        assert ex.section is not None and titles[ex.section] == seed[ex.number].section, ex.number


def test_ch26_file_names() -> None:
    names = sorted(p.name for p in (CONTENT_EXERCISES / "ch26-exercises").glob("*.md"))
    assert names == [f"26-{n:02d}.md" for n in range(1, 28)]


# ---------------------------------------------------------------- bodies


def _pairs(ex_set: ExerciseSet, seed: Seed) -> list[tuple[str, str, SeedExercise]]:
    by_number = seed.by_number()
    return [(ex.number, as_in_source(ex).body, by_number[ex.number]) for ex in ex_set.exercises]


@pytest.mark.parametrize("chapter", ["35", "26"])
def test_bodies_equal_seed(chapter: str, request: pytest.FixtureRequest) -> None:
    ex_set = request.getfixturevalue(f"set{chapter}")
    seed = request.getfixturevalue(f"seed{chapter}")
    for number, body, seed_ex in _pairs(ex_set, seed):
        assert normalise_body(body) == normalise_seed(number, seed_ex.text), number


@pytest.mark.parametrize("chapter", ["35", "26"])
def test_bodies_keep_structure(chapter: str, request: pytest.FixtureRequest) -> None:
    """Parts start their own paragraph; seed bullet lines and table rows are Markdown lines."""
    ex_set = request.getfixturevalue(f"set{chapter}")
    seed = request.getfixturevalue(f"seed{chapter}")
    for number, body, seed_ex in _pairs(ex_set, seed):
        body_lines = body.splitlines()
        for line in seed_ex.lines:
            if re.match(r"^\([a-z]\) ", line):
                i = next((i for i, b in enumerate(body_lines) if b.startswith(line[:4])), None)
                assert i is not None and (i == 0 or body_lines[i - 1] == ""), f"{number}: part {line[:3]}"
            elif line.startswith("|"):
                assert line in body_lines, f"{number}: table row {line!r}"
        for i, b in enumerate(body_lines):
            if b.startswith("|") and (i == 0 or not body_lines[i - 1].startswith("|")):
                assert i == 0 or body_lines[i - 1] == "", f"{number}: no blank line before table"


@pytest.mark.parametrize("chapter", ["35", "26"])
def test_bodies_render_cleanly(chapter: str, request: pytest.FixtureRequest) -> None:
    """No bad math or stray dollars, and no accidental emphasis (the seeds have none)."""
    ex_set = request.getfixturevalue(f"set{chapter}")
    for ex in ex_set.exercises:
        markdown.check(ex.body)
        html = markdown.render(ex.body)
        for tag in ("<em>", "<strong>", "<del>", "<merror"):
            assert tag not in html, f"{ex.number}: {tag} in rendered body"
        if "|---" in ex.body:
            assert "<table>" in html, f"{ex.number}: table not rendered"
        if re.search(r"^- ", ex.body, re.MULTILINE):
            assert "<ul>" in html, f"{ex.number}: list not rendered"


# ---------------------------------------------------------------- errata

# Every (exercise id, part id or None, field) that carries an erratum. The seeds print the
# exercise texts only: the answer parts (prompts, values, tolerances, units, explanations)
# were written for the site, so correcting one is not an erratum of the source (its note says
# what the site published before, with ``in_source: false``: tests/exercises/test_exercise_errata.py). Only a
# change to what a seed prints (an exercise's title or body, or a part that quotes the
# seed) is recorded as one.
ERRATA: set[tuple[str, str | None, str]] = set()


def _errata(ex_set: ExerciseSet) -> dict[tuple[str, str | None, str], str]:
    out: dict[tuple[str, str | None, str], str] = {}
    for ex in ex_set.exercises:
        # Corrections of the site's own parts (``in_source: false``) are not about the seed.
        out |= {(ex.id, None, e.field): e.source for e in ex.errata if e.in_source}
        out |= {(ex.id, part.id, e.field): e.source for part in ex.parts for e in part.errata if e.in_source}
    return out


def test_errata_are_the_listed_ones(set35: ExerciseSet, set26: ExerciseSet) -> None:
    assert set(_errata(set35)) | set(_errata(set26)) == ERRATA


@pytest.mark.parametrize("chapter", ["35", "26"])
def test_errata_sources_are_the_seed_text(chapter: str, request: pytest.FixtureRequest) -> None:
    """What an erratum says the source printed is what the seed prints, for that exercise."""
    ex_set = request.getfixturevalue(f"set{chapter}")
    seed = request.getfixturevalue(f"seed{chapter}").by_number()
    numbers = {ex.id: ex.number for ex in ex_set.exercises}
    for (ex_id, part_id, field_name), source in _errata(ex_set).items():
        number = numbers[ex_id]
        if field_name == "title":
            assert source == seed[number].title, (ex_id, field_name)
        elif field_name == "body":
            assert normalise_body(source) == normalise_seed(number, seed[number].text), (ex_id, field_name)
        else:
            seed_text = normalise_seed(number, seed[number].text)
            assert " ".join(source.split()) in seed_text, (ex_id, part_id, field_name)
