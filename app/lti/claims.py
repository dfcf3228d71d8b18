"""What a validated launch says, as plain data (pure: no database, no HTTP).

Roles map to a course role: Instructor, Administrator and ContentDeveloper are instructors,
TeachingAssistant (and Mentor) a TA, Learner a student; anything else (an observer, a guest) is no one
the course knows. The resource a launch opens is ours to name: deep-linked links carry it in their custom
parameters (``resource=lab:ring-allreduce``); a launch without one opens the course's home.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from app.courses.models import CourseRole

LTI = "https://purl.imsglobal.org/spec/lti/claim/"
AGS = "https://purl.imsglobal.org/spec/lti-ags/claim/endpoint"
NRPS = "https://purl.imsglobal.org/spec/lti-nrps/claim/namesroleservice"
DL = "https://purl.imsglobal.org/spec/lti-dl/claim/deep_linking_settings"
KINDS = ("quiz", "lab", "exercises", "deck")  # what deep linking offers and a resource names
GRADED = ("quiz", "lab")  # what sends scores to the LMS

_INSTRUCTOR = ("#Instructor", "#Administrator", "#ContentDeveloper")
_TA = ("Instructor#TeachingAssistant", "#TeachingAssistant", "#Mentor")
_LEARNER = ("#Learner", "#Student")


def course_role(roles: list[str]) -> CourseRole | None:
    """The highest course role the LMS roles give (a TA is checked before the plain Instructor it ends with)."""
    names = [r for r in roles if isinstance(r, str)]
    if any(r.endswith(_TA) for r in names):
        if any(r.endswith(_INSTRUCTOR) and not r.endswith(_TA) for r in names):
            return CourseRole.instructor
        return CourseRole.ta
    if any(r.endswith(_INSTRUCTOR) for r in names):
        return CourseRole.instructor
    if any(r.endswith(_LEARNER) for r in names):
        return CourseRole.student
    return None


def parse_resource(value: str | None) -> tuple[str, str] | None:
    """``"lab:ring-allreduce"`` → ``("lab", "ring-allreduce")``; None when it names no kind we have."""
    kind, _, item = (value or "").partition(":")
    return (kind, item) if kind in KINDS and item else None


def resource_path(kind: str, item: str, course_id: str) -> str:
    """Where a resource's page is, in the course."""
    path = {"quiz": "/quizzes/", "lab": "/labs/", "exercises": "/exercises/", "deck": "/flashcards/"}[kind]
    return f"{path}{item}?course={course_id}"


@dataclass(frozen=True)
class Facts:
    sub: str
    name: str
    given_name: str
    family_name: str
    email: str
    message_type: str
    deployment_id: str
    roles: list[str]
    context_id: str
    context_title: str
    resource_link_id: str
    resource: tuple[str, str] | None
    lineitem_url: str | None
    lineitems_url: str | None
    ags_scopes: list[str] = field(default_factory=list)
    memberships_url: str | None = None
    return_url: str | None = None

    @property
    def role(self) -> CourseRole | None:
        return course_role(self.roles)

    @property
    def is_deep_linking(self) -> bool:
        return self.message_type == "LtiDeepLinkingRequest"

    @property
    def display_name(self) -> str:
        return self.name or " ".join(p for p in (self.given_name, self.family_name) if p) or self.sub


def _dict(body: dict[str, Any], key: str) -> dict[str, Any]:
    value = body.get(key)
    return value if isinstance(value, dict) else {}


def facts(body: dict[str, Any]) -> Facts:
    context, link, ags = _dict(body, LTI + "context"), _dict(body, LTI + "resource_link"), _dict(body, AGS)
    custom = _dict(body, LTI + "custom")
    roles = body.get(LTI + "roles")
    return Facts(
        sub=str(body.get("sub") or ""),
        name=str(body.get("name") or ""),
        given_name=str(body.get("given_name") or ""),
        family_name=str(body.get("family_name") or ""),
        email=str(body.get("email") or ""),
        message_type=str(body.get(LTI + "message_type") or ""),
        deployment_id=str(body.get(LTI + "deployment_id") or ""),
        roles=[r for r in roles if isinstance(r, str)] if isinstance(roles, list) else [],
        context_id=str(context.get("id") or ""),
        context_title=str(context.get("title") or context.get("label") or ""),
        resource_link_id=str(link.get("id") or ""),
        resource=parse_resource(custom.get("resource")),
        lineitem_url=ags.get("lineitem") or None,
        lineitems_url=ags.get("lineitems") or None,
        ags_scopes=[s for s in ags.get("scope", []) if isinstance(s, str)],
        memberships_url=_dict(body, NRPS).get("context_memberships_url") or None,
        return_url=_dict(body, LTI + "launch_presentation").get("return_url") or None,
    )
