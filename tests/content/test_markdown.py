"""Every seed item renders: no errors, math as MathML, no leftover $...$, nothing unsafe."""

from __future__ import annotations

import re

from app.content import markdown
from app.content.models import ContentTree
from app.content.rules import markdown_fields

MATH = re.compile(r"<math.*?</math>", re.S)


def test_every_item_renders_without_raw_math(content_tree: ContentTree) -> None:
    rendered = 0
    for key, field, text in markdown_fields(content_tree):
        html = markdown.render(text)
        outside_math = MATH.sub("", html)
        # Only dollar signs the author escaped (\$) may remain; any other $ is unrendered math.
        assert outside_math.count("$") == text.count("\\$"), (key, field, outside_math[:200])
        assert "<merror" not in html, (key, field)
        assert "&lt; /&gt;" not in html, (key, field)  # a token type with no renderer
        rendered += 1
    assert rendered > 40 * 6 + 51 + 89 * 2


def test_math_becomes_mathml() -> None:
    html = markdown.render(r"Ring cost $2\frac{N-1}{N} D$ and $$T = \alpha + \frac{M}{\beta}$$")
    assert html.count("<math") == 2
    assert 'display="block"' in html
    assert "<mfrac>" in html


def test_escaped_dollar_is_a_dollar_sign() -> None:
    assert markdown.render(r"It costs \$50,000.") == "<p>It costs $50,000.</p>\n"


def test_html_is_escaped_and_sanitised() -> None:
    html = markdown.render("<script>alert(1)</script> [x](javascript:alert(1)) <img src=x onerror=alert(1)>")
    assert "<script" not in html and 'href="javascript' not in html and "<img" not in html
    assert "&lt;script&gt;" in html  # shown as text, not dropped silently


def test_tables_and_code_render() -> None:
    html = markdown.render("| a | b |\n|---|---|\n| 1 | 2 |\n\n`dist.send`")
    assert "<table>" in html and "<code>dist.send</code>" in html
