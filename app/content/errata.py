"""Errata: where authored content differs from its source document on purpose (pure).

An item's ``errata`` list records, per corrected field, what the source said and why it
changed. These helpers name the fields an erratum may correct and rebuild an item as its
source printed it, so fidelity checks compare against the source plus the listed errata.
"""

from __future__ import annotations

from collections.abc import Sequence
from html import escape
from typing import TypeVar

from app.content.models import AnswerPart, Card, Erratum, Exercise, Question

Corrected = Question | Exercise | AnswerPart | Card
Item = TypeVar("Item", Question, Exercise, AnswerPart, Card)
_ERRATA_FIELDS: dict[type, tuple[str, ...]] = {
    Question: ("prompt", "answer", "explanation"),
    Exercise: ("title", "body"),
    AnswerPart: ("prompt", "value", "tolerance", "unit", "explanation"),
    Card: ("front", "back"),
}


def erratum_fields(item: Corrected) -> list[str]:
    """The fields of ``item`` an erratum may name (a question's options as ``options.B``)."""
    fields = list(_ERRATA_FIELDS[type(item)])
    if isinstance(item, Question):
        fields[1:1] = [f"options.{o.key}" for o in item.options]
    return fields


def corrected_text(item: Corrected, field: str) -> str:
    """The item's current value of an erratum's ``field``, as text (a number as the source would print it)."""
    if field.startswith("options.") and isinstance(item, Question):
        return next(o.text for o in item.options if f"options.{o.key}" == field)
    value = getattr(item, field)
    return "" if value is None else str(value)


def same_text(a: str, b: str) -> bool:
    try:
        return float(a.rstrip("%")) == float(b.rstrip("%")) and a.endswith("%") == b.endswith("%")
    except ValueError:
        return " ".join(a.split()) == " ".join(b.split())


def as_in_source(item: Item) -> Item:
    """``item`` with every field corrected against its source put back to what the source said
    (errata dropped). Corrections of the product's own text (``in_source: false``) stay as they are.

    A corrected ``value`` comes back as a number; any other field as the source's text.
    """
    changes: dict[str, object] = {"errata": []}
    options = None
    for erratum in (e for e in item.errata if e.in_source):
        if erratum.field.startswith("options.") and isinstance(item, Question):
            key = erratum.field.removeprefix("options.")
            options = [
                o.model_copy(update={"text": erratum.source}) if o.key == key else o for o in options or item.options
            ]
        elif erratum.field == "value":
            changes["value"] = float(erratum.source)
        elif erratum.field == "tolerance" and not erratum.source.endswith("%"):
            changes["tolerance"] = float(erratum.source)
        else:
            changes[erratum.field] = erratum.source
    if options is not None:
        changes["options"] = options
    return item.model_copy(update=changes)


def notes_html(errata: Sequence[Erratum]) -> str:
    """The students' view of ``errata``: one "Corrected:" note each, appended where the item's
    answer shows (a question's explanation, a part's solution, a card's back, an exercise's body)."""
    from app.content.markdown import render_inline  # pages only: the content check never renders

    return "".join(
        f'<div class="erratum" role="note" data-field="{escape(e.field)}"><strong>Corrected:</strong> '
        f"{render_inline(e.note)}</div>"
        for e in errata
    )


def notes_markdown(errata: Sequence[Erratum] | Sequence[dict[str, str]]) -> str:
    """The same notes as Markdown, for the JSON API's Markdown fields ("" when there are none)."""
    notes = [e.note if isinstance(e, Erratum) else e["note"] for e in errata]
    return "".join(f"\n\n**Corrected:** {note}" for note in notes)
