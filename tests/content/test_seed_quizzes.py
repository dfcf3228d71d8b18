"""The two seed quizzes were converted to content/quizzes/ without losing anything.

Each test parses the seed document itself (independently of the YAML) and
compares it with the loaded content, so a dropped word, a changed answer or a
mangled range fails here.

Seeds:
- 000_c0c9601b042dcc44.txt: "Chapter 35: Quiz -- Distributed Training and Scaling" (plain text)
- 001_f967120a294163c3.txt: "Module 202 Quiz: Distributed Training at Scale" (Markdown)

Some questions correct their source on purpose and say so in an ``errata`` list. The
fidelity tests compare each question as its source printed it (``as_in_source``: each
corrected field put back to the erratum's ``source``) with the seed; further tests check
that each erratum's ``source`` is the seed's text and that the question really differs
from it, and pin the list of corrected fields.
"""

from __future__ import annotations

import html
import re
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from app.content.errata import as_in_source
from app.content.markdown import render
from app.content.models import ContentTree, Question, Quiz

CH35_SEED = "000_c0c9601b042dcc44.txt"
M202_SEED = "001_f967120a294163c3.txt"
CH35_ID = "ch35-quiz"
M202_ID = "module-202"

# The questions that correct their source, and the fields each one corrects.
CORRECTED = {
    "ch35-q04": ["options.A"],
    "ch35-q13": ["explanation"],
    "m202-q02": ["prompt", "explanation"],
    "m202-q04": ["explanation"],
    "m202-q05": ["options.B"],
    "m202-q09": ["explanation"],
    "m202-q14": ["explanation"],
    "m202-q15": ["prompt", "explanation"],
    "m202-q16": ["explanation"],
    "m202-q19": ["explanation"],
    "m202-q21": ["prompt", "explanation"],
    "m202-q23": ["answer", "explanation"],
    "m202-q25": ["prompt", "explanation"],
}

# A backslash before ASCII punctuation is a CommonMark escape (`\$`, `\*`, `\_`).
_ESCAPE = re.compile(r"\\([!-/:-@\[-`{-~])")


def norm(text: str) -> str:
    """Compare text as a reader sees it: escapes removed, whitespace collapsed."""
    return " ".join(_ESCAPE.sub(r"\1", text).split())


@dataclass
class SeedQuestion:
    number: int
    prompt: str
    options: dict[str, str]
    answer: str
    explanation: str
    section: str | None = None


@dataclass
class SeedTier:
    min: int
    max: int
    level: str
    recommendation: str


@dataclass
class SeedQuiz:
    title: str
    questions: list[SeedQuestion]
    tiers: list[SeedTier]
    # Module 202 only.
    sections: list[tuple[str, int, int]] = field(default_factory=list)  # (title, first, last question)
    answer_key: dict[int, str] = field(default_factory=dict)
    header: dict[str, str] = field(default_factory=dict)


# --- seed parsers -------------------------------------------------------------------------------


def parse_ch35(path: Path) -> SeedQuiz:
    text = path.read_text(encoding="utf-8")
    lines = [line.strip() for line in text.splitlines()]
    questions: list[SeedQuestion] = []
    for i, line in enumerate(lines):
        head = re.fullmatch(r"Question (\d+)", line)
        if not head:
            continue
        prompt, option_line, answer_line = lines[i + 1], lines[i + 2], lines[i + 3]
        # "A) text B) text C) text D) text" on one line.
        pieces = re.split(r"(?:^|\s)([A-Z])\)\s", option_line)
        assert pieces[0] == "", option_line
        keys, texts = pieces[1::2], pieces[2::2]
        assert keys == ["A", "B", "C", "D"], option_line
        answer = re.fullmatch(r"Answer:\s*([A-Z])\s+Explanation:\s*(.+)", answer_line)
        assert answer, answer_line
        questions.append(
            SeedQuestion(
                number=int(head.group(1)),
                prompt=prompt,
                options={k: t.strip() for k, t in zip(keys, texts, strict=True)},
                answer=answer.group(1),
                explanation=answer.group(2),
            )
        )
    start = lines.index("Scoring Guide")
    tiers = []
    for row in lines[start + 1 :]:
        if not row.startswith("|") or set(row) <= set("|- "):
            continue
        score, level, recommendation = (cell.strip() for cell in row.strip("|").split("|"))
        if score == "Score":
            continue
        lo, hi = (int(n) for n in score.split("-"))
        tiers.append(SeedTier(lo, hi, level, recommendation))
    return SeedQuiz(title=lines[0], questions=questions, tiers=tiers)


def _m202_range(text: str) -> tuple[int, int]:
    text = text.strip()
    if m := re.fullmatch(r"(\d+)/(\d+)", text):  # "25/25": that exact score
        return int(m.group(1)), int(m.group(1))
    if m := re.fullmatch(r"<\s*(\d+)", text):  # "< 16": 0..15
        return 0, int(m.group(1)) - 1
    if m := re.fullmatch(r"(\d+)\s*-\s*(\d+)", text):  # "20-24"
        return int(m.group(1)), int(m.group(2))
    raise AssertionError(f"unknown score range {text!r}")


def parse_m202(path: Path) -> SeedQuiz:
    lines = path.read_text(encoding="utf-8").splitlines()
    title = lines[0].removeprefix("# ").strip()
    header = {}
    for line in lines:
        m = re.fullmatch(r"\*\*(.+?)\*\*:\s*(.+?)\s*", line)
        if m and m.group(1) not in ("Answer", "Explanation"):
            header[m.group(1)] = m.group(2)

    sections: list[tuple[str, int, int]] = []
    questions: list[SeedQuestion] = []
    block: list[str] | None = None
    blocks: list[tuple[int, str | None, list[str]]] = []
    for line in lines:
        if m := re.fullmatch(r"## Section \d+: (.+?) \(Questions (\d+)-(\d+)\)\s*", line):
            sections.append((m.group(1), int(m.group(2)), int(m.group(3))))
            block = None
        elif m := re.fullmatch(r"### Question (\d+)\s*", line):
            block = []
            blocks.append((int(m.group(1)), sections[-1][0] if sections else None, block))
        elif line.startswith("## ") or line.strip() == "---":
            block = None
        elif block is not None:
            block.append(line)

    for number, section, body in blocks:
        prompt: list[str] = []
        options: dict[str, str] = {}
        answer = None
        explanation: list[str] = []
        part = "prompt"
        for line in body:
            if m := re.fullmatch(r"([A-Z])\) (.*)", line.strip()):
                part = "options"
                options[m.group(1)] = m.group(2).strip()
            elif m := re.fullmatch(r"\*\*Answer\*\*:\s*([A-Z])\s*", line):
                part = "answer"
                answer = m.group(1)
            elif m := re.fullmatch(r"\*\*Explanation\*\*:\s*(.*)", line):
                part = "explanation"
                explanation.append(m.group(1))
            elif part == "prompt":
                prompt.append(line)
            elif part == "explanation":
                explanation.append(line)
            else:
                assert not line.strip(), f"question {number}: unexpected line {line!r}"
        assert answer is not None, f"question {number}: no answer"
        questions.append(
            SeedQuestion(number, "\n".join(prompt).strip(), options, answer, "\n".join(explanation).strip(), section)
        )

    text = "\n".join(lines)
    guide = re.search(r"^## Scoring Guide\s*\n(.*?)(?=^## |\Z)", text, re.M | re.S)
    assert guide, "no scoring guide in the seed"
    tiers = []
    for line in guide.group(1).splitlines():
        if m := re.fullmatch(r"- (.+?):\s*(.+?) - (.+?)\s*", line):
            lo, hi = _m202_range(m.group(1))
            tiers.append(SeedTier(lo, hi, m.group(2), m.group(3)))
    summary = re.search(r"^## Answer Key Summary\s*\n(.*?)(?=^---|^## |\Z)", text, re.M | re.S)
    assert summary, "no answer key summary in the seed"
    answer_key = {int(n): letter for n, letter in re.findall(r"(\d+)\.\s*([A-Z])\b", summary.group(1))}
    return SeedQuiz(title, questions, tiers, sections, answer_key, header)


# --- fixtures -----------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def ch35_seed(seeds_dir: Path) -> SeedQuiz:
    return parse_ch35(seeds_dir / CH35_SEED)


@pytest.fixture(scope="module")
def m202_seed(seeds_dir: Path) -> SeedQuiz:
    return parse_m202(seeds_dir / M202_SEED)


def _quiz(tree: ContentTree, quiz_id: str) -> Quiz:
    found = [q for q in tree.quizzes if q.id == quiz_id]
    assert len(found) == 1, f"expected one quiz '{quiz_id}', found {[q.id for q in tree.quizzes]}"
    return found[0]


@pytest.fixture(scope="module")
def ch35(content_tree: ContentTree) -> Quiz:
    return _quiz(content_tree, CH35_ID)


@pytest.fixture(scope="module")
def m202(content_tree: ContentTree) -> Quiz:
    return _quiz(content_tree, M202_ID)


# --- the parsers read the seeds as expected (guards against a parser that silently finds nothing) --


def test_seed_parsers_find_everything(ch35_seed: SeedQuiz, m202_seed: SeedQuiz) -> None:
    assert [q.number for q in ch35_seed.questions] == list(range(1, 16))
    assert [q.number for q in m202_seed.questions] == list(range(1, 26))
    for seed in (ch35_seed, m202_seed):
        for q in seed.questions:
            assert list(q.options) == ["A", "B", "C", "D"], q.number
            assert q.prompt and q.explanation and all(q.options.values()), q.number
    assert len(ch35_seed.tiers) == 5
    assert len(m202_seed.tiers) == 4
    assert sorted(m202_seed.answer_key) == list(range(1, 26))
    assert m202_seed.header["Total Questions"] == "25"


# --- counts and structure -----------------------------------------------------------------------


def test_question_counts(ch35: Quiz, m202: Quiz, ch35_seed: SeedQuiz, m202_seed: SeedQuiz) -> None:
    assert len(ch35.questions) == len(ch35_seed.questions) == 15
    assert len(m202.questions) == len(m202_seed.questions) == int(m202_seed.header["Total Questions"]) == 25


def test_question_ids(ch35: Quiz, m202: Quiz) -> None:
    assert [q.id for q in ch35.questions] == [f"ch35-q{n:02d}" for n in range(1, 16)]
    assert [q.id for q in m202.questions] == [f"m202-q{n:02d}" for n in range(1, 26)]


def test_titles(ch35: Quiz, m202: Quiz, ch35_seed: SeedQuiz, m202_seed: SeedQuiz) -> None:
    assert ch35.title == ch35_seed.title == "Chapter 35: Quiz -- Distributed Training and Scaling"
    assert m202.title == m202_seed.title == "Module 202 Quiz: Distributed Training at Scale"


def test_m202_sections_match_seed_headings(m202: Quiz, m202_seed: SeedQuiz) -> None:
    assert len(m202.sections) == len(m202_seed.sections) == 5
    assert [s.title for s in m202.sections] == [title for title, _, _ in m202_seed.sections]
    # The ranges in the headings tile 1..25 with no gap.
    assert [first for _, first, _ in m202_seed.sections] == [1] + [last + 1 for _, _, last in m202_seed.sections[:-1]]
    assert m202_seed.sections[-1][2] == 25
    sizes = [last - first + 1 for _, first, last in m202_seed.sections]
    assert sizes[0] == 7 and sizes[1] == 5 and sizes[-1] == 4
    for section, (_, first, last) in zip(m202.sections, m202_seed.sections, strict=True):
        in_quiz = [q.id for q in m202.questions if q.section == section.id]
        assert in_quiz == [f"m202-q{n:02d}" for n in range(first, last + 1)], section.id
    # Each question's own heading sits under the section that claims it.
    for seed_q, q in zip(m202_seed.questions, m202.questions, strict=True):
        title = next(s.title for s in m202.sections if s.id == q.section)
        assert title == seed_q.section, q.id


def test_ch35_has_no_module_only_fields(ch35: Quiz) -> None:
    assert ch35.sections == []
    assert all(q.section is None for q in ch35.questions)
    assert ch35.passing_score is None
    assert ch35.time_limit_minutes is None
    assert ch35.version is None and ch35.last_updated is None
    assert ch35.description == ""


# --- answers ------------------------------------------------------------------------------------


def test_m202_answers_equal_answer_key_summary(m202: Quiz, m202_seed: SeedQuiz) -> None:
    got = {int(q.id.removeprefix("m202-q")): as_in_source(q).answer for q in m202.questions}
    assert got == m202_seed.answer_key
    # The per-question "**Answer**:" lines agree with the summary too.
    assert {q.number: q.answer for q in m202_seed.questions} == m202_seed.answer_key


def test_ch35_answers_equal_seed(ch35: Quiz, ch35_seed: SeedQuiz) -> None:
    assert [as_in_source(q).answer for q in ch35.questions] == [q.answer for q in ch35_seed.questions]


# --- text: every word kept ----------------------------------------------------------------------


def _text_mismatches(quiz: Quiz, seed: SeedQuiz) -> list[str]:
    out = []
    for q, s in zip(map(as_in_source, quiz.questions), seed.questions, strict=True):
        if norm(q.prompt) != norm(s.prompt):
            out.append(f"{q.id} prompt: {q.prompt!r} != seed {s.prompt!r}")
        if [o.key for o in q.options] != list(s.options):
            out.append(f"{q.id} option keys: {[o.key for o in q.options]} != seed {list(s.options)}")
        for o in q.options:
            if norm(o.text) != norm(s.options.get(o.key, "")):
                out.append(f"{q.id} option {o.key}: {o.text!r} != seed {s.options.get(o.key)!r}")
        if norm(q.explanation) != norm(s.explanation):
            out.append(f"{q.id} explanation: {q.explanation!r} != seed {s.explanation!r}")
    return out


def test_ch35_text_equals_seed(ch35: Quiz, ch35_seed: SeedQuiz) -> None:
    assert _text_mismatches(ch35, ch35_seed) == []


def test_m202_text_equals_seed(m202: Quiz, m202_seed: SeedQuiz) -> None:
    assert _text_mismatches(m202, m202_seed) == []


# --- errata: where a question corrects its seed on purpose --------------------------------------


def _seed_text(s: SeedQuestion, field: str) -> str:
    if field.startswith("options."):
        return s.options[field.removeprefix("options.")]
    return {"prompt": s.prompt, "answer": s.answer, "explanation": s.explanation}[field]


def _current_text(q: Question, field: str) -> str:
    if field.startswith("options."):
        return next(o.text for o in q.options if o.key == field.removeprefix("options."))
    return {"prompt": q.prompt, "answer": q.answer, "explanation": q.explanation}[field]


def test_corrected_questions_are_exactly_these(ch35: Quiz, m202: Quiz) -> None:
    corrected = {q.id: [e.field for e in q.errata] for quiz in (ch35, m202) for q in quiz.questions if q.errata}
    assert corrected == CORRECTED


def test_erratum_source_is_the_seed_text(ch35: Quiz, m202: Quiz, ch35_seed: SeedQuiz, m202_seed: SeedQuiz) -> None:
    """Each erratum records what the seed says in that field, and the question now says something else."""
    out = []
    for quiz, seed in ((ch35, ch35_seed), (m202, m202_seed)):
        for q, s in zip(quiz.questions, seed.questions, strict=True):
            for e in q.errata:
                want = _seed_text(s, e.field)
                if norm(e.source) != norm(want):
                    out.append(f"{q.id} {e.field}: erratum source {e.source!r} != seed {want!r}")
                if norm(_current_text(q, e.field)) == norm(want):
                    out.append(f"{q.id} {e.field}: the question still says what the seed says")
                if not e.note.strip():
                    out.append(f"{q.id} {e.field}: no note")
    assert out == []
    assert sum(len(q.errata) for quiz in (ch35, m202) for q in quiz.questions) == sum(map(len, CORRECTED.values()))


def _fields(q: Question) -> list[tuple[str, str]]:
    return [("prompt", q.prompt), ("explanation", q.explanation)] + [(f"option {o.key}", o.text) for o in q.options]


def test_rendered_text_is_literal(ch35: Quiz, m202: Quiz) -> None:
    """None of these seeds uses inline Markdown in its questions, so rendering must not
    turn `N * D`, `world_size` or `~33%` into emphasis, strikethrough or math."""
    out = []
    for quiz in (ch35, m202):
        for q in quiz.questions:
            for name, text in _fields(q):
                rendered = render(text).strip()
                inner = rendered.removeprefix("<p>").removesuffix("</p>")
                if "<" in inner or norm(html.unescape(inner)) != norm(text):
                    out.append(f"{q.id} {name}: {text!r} renders as {rendered!r}")
            for e in q.errata:
                rendered = render(e.note).strip()
                inner = rendered.removeprefix("<p>").removesuffix("</p>")
                if "<" in inner or norm(html.unescape(inner)) != norm(e.note):
                    out.append(f"{q.id} {e.field} note: {e.note!r} renders as {rendered!r}")
    assert out == []


def test_unicode_survives(ch35: Quiz, m202: Quiz) -> None:
    text = "\n".join(t for quiz in (ch35, m202) for q in quiz.questions for _, t in _fields(q))
    for needle in ("N² times", "2×", "≈", "λ = 1/100,000", "e^(-256 × 720/100,000)", "±3.4e38", "lr_base × world_size"):
        assert needle in text, needle
    assert "N * D" in [o.text for o in ch35.questions[1].options]


# --- scoring guides and quiz settings -----------------------------------------------------------


def _tiers(quiz: Quiz) -> list[SeedTier]:
    return [SeedTier(t.min, t.max, t.level, t.recommendation) for t in quiz.scoring_guide]


def test_ch35_scoring_guide(ch35: Quiz, ch35_seed: SeedQuiz) -> None:
    assert _tiers(ch35) == ch35_seed.tiers
    assert [(t.min, t.max) for t in ch35.scoring_guide] == [(14, 15), (11, 13), (8, 10), (5, 7), (0, 4)]


def test_m202_scoring_guide(m202: Quiz, m202_seed: SeedQuiz) -> None:
    assert _tiers(m202) == m202_seed.tiers
    assert _tiers(m202) == [
        SeedTier(25, 25, "Expert level", "Ready for production distributed training"),
        SeedTier(20, 24, "Strong understanding", "Minor gaps to address"),
        SeedTier(16, 19, "Good foundation", "Review challenging topics"),
        SeedTier(0, 15, "Need more study", "Revisit lecture notes and labs"),
    ]


def test_scoring_guides_cover_every_score(ch35: Quiz, m202: Quiz) -> None:
    for quiz in (ch35, m202):
        covered = sorted(n for t in quiz.scoring_guide for n in range(t.min, t.max + 1))
        assert covered == list(range(len(quiz.questions) + 1)), quiz.id


def test_m202_settings(m202: Quiz, m202_seed: SeedQuiz) -> None:
    passing = re.fullmatch(r"(\d+)% \((\d+)/(\d+) correct\)", m202_seed.header["Passing Score"])
    assert passing, m202_seed.header["Passing Score"]
    assert m202.passing_score == pytest.approx(int(passing.group(1)) / 100) == pytest.approx(0.8)
    assert int(passing.group(2)) / int(passing.group(3)) == pytest.approx(m202.passing_score)
    assert int(passing.group(3)) == len(m202.questions)
    limit = re.fullmatch(r"(\d+) minutes", m202_seed.header["Time Limit"])
    assert limit and m202.time_limit_minutes == int(limit.group(1)) == 60
    assert m202.version == m202_seed.header["Version"] == "1.0"
    assert m202.last_updated == m202_seed.header["Last Updated"] == "2025-10-16"
    assert m202.shuffle_options is True  # option order is shuffled per attempt (15 of the 25 answers are B)
