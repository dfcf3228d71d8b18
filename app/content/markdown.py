"""Markdown to safe HTML, with LaTeX math rendered to MathML on the server.

Authors write CommonMark with pipe tables, ``$inline$`` and ``$$display$$``
math. Math is converted with latex2mathml, so pages need no math script and
the browser renders it natively. The output is sanitised with nh3 (ammonia):
content is trusted-ish, but a typo must never become a script.
"""

from __future__ import annotations

import re
from functools import lru_cache

import nh3
from latex2mathml.converter import convert as latex_to_mathml
from markdown_it import MarkdownIt
from markdown_it.common.utils import escapeHtml
from markdown_it.token import Token
from mdit_py_plugins.dollarmath import dollarmath_plugin

MATHML_TAGS = {
    "math", "semantics", "annotation", "mrow", "mi", "mn", "mo", "ms", "mtext", "mspace", "msub", "msup",
    "msubsup", "munder", "mover", "munderover", "mfrac", "msqrt", "mroot", "mstyle", "mpadded", "mphantom",
    "menclose", "merror", "mtable", "mtr", "mtd", "mlabeledtr", "mmultiscripts", "mprescripts", "none",
}  # fmt: skip
MATHML_ATTRS = {
    "display", "xmlns", "mathvariant", "stretchy", "fence", "separator", "lspace", "rspace", "columnalign",
    "displaystyle", "accent", "accentunder", "linethickness", "width", "height", "depth", "notation", "form",
    "minsize", "maxsize", "movablelimits", "scriptlevel", "rowspacing", "columnspacing", "columnlines",
    "rowlines", "frame", "symmetric", "largeop", "mathsize", "encoding", "align", "rowalign",
}  # fmt: skip
HTML_TAGS = nh3.ALLOWED_TAGS | {"span", "div", "input"}
_ATTRS = {tag: set(attrs) for tag, attrs in nh3.ALLOWED_ATTRIBUTES.items()}
_ATTRS.update({"code": {"class"}, "span": {"class"}, "div": {"class"}, "th": {"style"}, "td": {"style"}})
_ATTRS.update({tag: MATHML_ATTRS for tag in MATHML_TAGS})
_DOLLAR = re.compile(r"(?<!\\)\$")


class MarkdownError(ValueError):
    """The Markdown source cannot be rendered as written."""


def _math(display: bool):
    def render(self, tokens: list[Token], idx: int, options, env) -> str:  # type: ignore[no-untyped-def]
        latex = tokens[idx].content.strip()
        try:
            mathml = latex_to_mathml(latex, display="block" if display else "inline")
        except Exception as exc:  # latex2mathml raises many kinds on bad input
            raise MarkdownError(f"bad math ${latex}$: {exc or type(exc).__name__}") from None
        return f'<div class="math">{mathml}</div>' if display else mathml

    return render


@lru_cache(maxsize=1)
def _parser() -> MarkdownIt:
    md = MarkdownIt("commonmark", {"html": False, "typographer": False}).enable("table").enable("strikethrough")
    # Keep escaped characters (`\$`) as their own tokens so a stray `$` can be told from an escaped one.
    md.disable("text_join")
    md.add_render_rule("text_special", lambda self, tokens, idx, options, env: escapeHtml(tokens[idx].content))
    md.use(dollarmath_plugin, allow_space=True, allow_digits=False, double_inline=True)
    md.add_render_rule("math_inline", _math(display=False))
    md.add_render_rule("math_inline_double", _math(display=True))
    md.add_render_rule("math_block", _math(display=True))
    md.add_render_rule("math_block_label", _math(display=True))
    return md


def _stray_dollar(tokens: list[Token]) -> str | None:
    for token in tokens:
        if token.children:
            found = _stray_dollar(token.children)
            if found:
                return found
        elif token.type == "text" and _DOLLAR.search(token.content):
            return token.content
    return None


def check(text: str) -> None:
    """Raise MarkdownError if ``text`` would not render cleanly."""
    if "$" not in text:
        return  # only math (bad LaTeX, a stray `$`) can fail to render; most fields have none
    tokens = _parser().parse(text)
    stray = _stray_dollar(tokens)
    if stray is not None:
        raise MarkdownError(f"unbalanced '$' in {stray.strip()[:60]!r} (write \\$ for a dollar sign)")
    _parser().renderer.render(tokens, _parser().options, {})


def render(text: str) -> str:
    """Render Markdown with math to sanitised HTML."""
    html = _parser().render(text)
    return nh3.clean(html, tags=HTML_TAGS | MATHML_TAGS, attributes=_ATTRS, link_rel="noopener noreferrer")


def render_inline(text: str) -> str:
    """Render one line of Markdown without a wrapping paragraph."""
    html = render(text).strip()
    if html.startswith("<p>") and html.endswith("</p>") and html.count("<p>") == 1:
        return html[3:-4]
    return html
