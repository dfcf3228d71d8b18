"""Small content trees written to disk, for tests that break them on purpose."""

from __future__ import annotations

import textwrap
from pathlib import Path

QUIZ = """\
id: tiny-quiz
title: Tiny quiz
passing_score: 0.5
sections:
  - id: basics
    title: Basics
scoring_guide:
  - min: 2
    max: 2
    level: Expert
    recommendation: Carry on
  - min: 0
    max: 1
    level: Beginner
    recommendation: Read again
questions:
  - id: tq-1
    section: basics
    prompt: |
      What sums tensors across ranks?
    options:
      A: Broadcast
      B: All-reduce
    answer: B
    explanation: |
      All-reduce sums, $\\sum_i x_i$.
  - id: tq-2
    section: basics
    prompt: Which is point-to-point?
    options:
      A: send
      B: all_gather
    answer: A
    explanation: send goes to one peer.
"""

SET = """\
id: tiny-set
title: Tiny set
sections:
  - id: s1
    title: Section one
"""

EXERCISE = """\
---
id: ex-t-1
number: "1.1"
title: First
section: s1
---
Show that $2(N-1)/N < 2$.
"""

DECK = """\
id: tiny-deck
title: Tiny deck
"""

CARD = """\
---
id: tc-001
number: 1
topic: Collectives
front: |
  What does all-reduce do?
---
Sums across ranks.

- every rank gets the sum
"""


def write_tree(root: Path, **overrides: str) -> Path:
    """Write a valid tiny tree under ``root``; ``overrides`` replace files by relative path."""
    files = {
        "quizzes/tiny-quiz.yaml": QUIZ,
        "exercises/tiny-set/set.yaml": SET,
        "exercises/tiny-set/01.md": EXERCISE,
        "decks/tiny-deck/deck.yaml": DECK,
        "decks/tiny-deck/cards/001.md": CARD,
    }
    files.update(overrides)
    for rel, text in files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(text), encoding="utf-8")
    return root
