"""What a validated launch says, read from its claims (pure)."""

from __future__ import annotations

import pytest

from app.courses.models import CourseRole
from app.lti import claims

M = "http://purl.imsglobal.org/vocab/lis/v2/membership#"
INST = "http://purl.imsglobal.org/vocab/lis/v2/institution/person#"


@pytest.mark.parametrize(
    ("roles", "expected"),
    [
        ([M + "Learner"], CourseRole.student),
        ([M + "Instructor"], CourseRole.instructor),
        ([M + "ContentDeveloper"], CourseRole.instructor),
        ([M + "Administrator"], CourseRole.instructor),
        # A TA is an Instructor sub-role: it must not be read as the Instructor it ends like.
        ([M + "Instructor#TeachingAssistant"], CourseRole.ta),
        ([M + "Instructor", M + "Instructor#TeachingAssistant"], CourseRole.instructor),
        ([M + "Learner", M + "Instructor"], CourseRole.instructor),
        (["Learner"], None),  # a bare name is not an LTI 1.3 role URI ... ends with neither '#Learner'
        ([M + "Mentor"], CourseRole.ta),
        ([INST + "Student"], CourseRole.student),
        (["http://purl.imsglobal.org/vocab/lis/v2/membership#Observer"], None),
        ([], None),
    ],
)
def test_lms_roles_map_to_course_roles(roles: list[str], expected: CourseRole | None) -> None:
    assert claims.course_role(roles) == expected


def test_a_resource_is_one_of_our_kinds_and_an_id() -> None:
    assert claims.parse_resource("lab:ring-allreduce") == ("lab", "ring-allreduce")
    assert claims.parse_resource("quiz:q1") == ("quiz", "q1")
    assert claims.parse_resource("video:x") is None
    assert claims.parse_resource("lab:") is None
    assert claims.parse_resource(None) is None
    assert claims.resource_path("lab", "ring-allreduce", "c1") == "/labs/ring-allreduce?course=c1"


def test_facts_read_every_claim_and_tolerate_missing_ones() -> None:
    body = {
        "sub": "u-1",
        "given_name": "Ada",
        "family_name": "Lovelace",
        claims.LTI + "message_type": "LtiResourceLinkRequest",
        claims.LTI + "deployment_id": "d1",
        claims.LTI + "roles": [M + "Learner", 7],
        claims.LTI + "context": {"id": "ctx", "label": "DT101"},
        claims.LTI + "resource_link": {"id": "rl"},
        claims.LTI + "custom": {"resource": "quiz:foundations"},
        claims.AGS: {"scope": ["s"], "lineitems": "http://lms/li", "lineitem": "http://lms/li/1"},
        claims.NRPS: {"context_memberships_url": "http://lms/m"},
    }
    f = claims.facts(body)
    assert (f.sub, f.display_name, f.context_id, f.context_title) == ("u-1", "Ada Lovelace", "ctx", "DT101")
    assert f.roles == [M + "Learner"] and f.role == CourseRole.student
    assert f.resource == ("quiz", "foundations")
    assert (f.lineitem_url, f.lineitems_url, f.ags_scopes) == ("http://lms/li/1", "http://lms/li", ["s"])
    assert f.memberships_url == "http://lms/m" and not f.is_deep_linking
    bare = claims.facts({"sub": "x", claims.LTI + "roles": "not a list", claims.AGS: "nonsense"})
    assert bare.roles == [] and bare.role is None and bare.resource is None and bare.lineitem_url is None
