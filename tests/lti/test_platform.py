"""The test LMS (``tests.lti.platform``) alone, against a stand-in tool that only serves a key set."""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator
from typing import Any
from urllib.parse import urlencode

import httpx
import jwt
import pytest
from fastapi import FastAPI

from tests.lti.platform import (
    LEARNER,
    LINEITEM,
    SCORE,
    KeyPair,
    Member,
    Platform,
    ThreadedServer,
)

DL = "https://purl.imsglobal.org/spec/lti-dl/claim/"
LTI = "https://purl.imsglobal.org/spec/lti/claim/"
HTTP = httpx.Client(timeout=10)  # one client: a new one per request costs an SSL context each
ADA = Member("lms-ada", "Ada Lovelace", "Ada", "Lovelace", "ada@example.edu", [LEARNER])


class KeySetTool:
    """A tool that serves only its key set, at ``/lti/jwks.json``, and signs what a tool signs."""

    def __init__(self) -> None:
        self.keys = [KeyPair.generate()]
        app = FastAPI()
        app.add_api_route("/lti/jwks.json", lambda: {"keys": [k.jwk for k in self.keys]}, methods=["GET"])
        self.server = ThreadedServer(app)
        self.url = self.server.url

    def sign(self, claims: dict[str, Any]) -> str:
        return jwt.encode(claims, self.keys[0].private, algorithm="RS256", headers={"kid": self.keys[0].kid})

    def assertion(self, platform: Platform, **changes: Any) -> str:
        now = int(time.time())
        claims = {"iss": platform.client_id, "sub": platform.client_id, "aud": platform.token_url, "iat": now}
        return self.sign({**claims, "exp": now + 300, "jti": uuid.uuid4().hex, **changes})

    def token(self, platform: Platform, scopes: list[str], **changes: Any) -> httpx.Response:
        form = {
            "grant_type": "client_credentials",
            "client_assertion_type": "urn:ietf:params:oauth:client-assertion-type:jwt-bearer",
            "client_assertion": self.assertion(platform, **changes),
            "scope": " ".join(scopes),
        }
        return HTTP.post(platform.token_url, data=form)


@pytest.fixture(scope="module")
def tool() -> Iterator[KeySetTool]:
    t = KeySetTool()
    t.server.start()
    yield t
    t.server.stop()


@pytest.fixture(scope="module")
def platform(tool: KeySetTool) -> Iterator[Platform]:
    with Platform(tool.url) as lms:
        yield lms


def auth_url(platform: Platform, params: dict[str, str], **changes: str) -> str:
    """The authorization request a tool redirects to after ``params`` reached its login initiation."""
    query = {
        "scope": "openid", "response_type": "id_token", "response_mode": "form_post", "prompt": "none",
        "client_id": params["client_id"], "redirect_uri": platform.tool_url + "/lti/launch",
        "state": "state-" + uuid.uuid4().hex, "nonce": "nonce-" + uuid.uuid4().hex,
        "login_hint": params["login_hint"], "lti_message_hint": params["lti_message_hint"],
    }  # fmt: skip
    return platform.auth_login_url + "?" + urlencode({**query, **changes})


def id_token(platform: Platform, **kwargs: Any) -> str:
    _action, fields = platform.authorize(auth_url(platform, platform.login_params(ADA, **kwargs)))
    return fields["id_token"]


def verify(platform: Platform, token: str) -> dict[str, Any]:
    """Check an id_token as a tool must: the key its kid names in the platform's key set, aud, iss, exp."""
    key = jwt.PyJWKClient(platform.jwks_url, cache_keys=False).get_signing_key_from_jwt(token)
    return jwt.decode(token, key.key, algorithms=["RS256"], audience=platform.client_id, issuer=platform.issuer)


def test_the_key_set_serves_the_signing_key_and_keeps_a_rotated_one(tool: KeySetTool) -> None:
    with Platform(tool.url) as lms:
        first = HTTP.get(lms.jwks_url).json()["keys"]
        assert [(k["kty"], k["alg"], k["use"]) for k in first] == [("RSA", "RS256", "sig")] and first[0]["kid"]
        lms.rotate_key()
        after = [k["kid"] for k in HTTP.get(lms.jwks_url).json()["keys"]]
        assert len(after) == 2 and after[1] == first[0]["kid"]
        assert jwt.get_unverified_header(id_token(lms))["kid"] == after[0]


def test_authorization_refuses_a_foreign_redirect_uri_a_stranger_and_a_spent_hint(platform: Platform) -> None:
    params = platform.login_params(ADA)
    foreign = HTTP.get(auth_url(platform, params, redirect_uri="https://evil.example/lti/launch"))
    assert foreign.status_code == 400 and "redirect_uri" in foreign.text
    stranger = HTTP.get(auth_url(platform, params, client_id="someone-else"))
    assert stranger.status_code == 400 and "client_id" in stranger.text
    assert HTTP.get(auth_url(platform, params)).status_code == 200  # refusals spent nothing
    spent = HTTP.get(auth_url(platform, params))
    assert spent.status_code == 400 and "lti_message_hint already used" in spent.text
    unknown = HTTP.get(auth_url(platform, {**params, "lti_message_hint": "made-up"}))
    assert unknown.status_code == 400 and "unknown lti_message_hint" in unknown.text


def test_an_id_token_verifies_against_the_key_set_and_carries_the_nonce(platform: Platform) -> None:
    url = auth_url(platform, platform.login_params(ADA, resource_link_id="link-7"), nonce="n-42", state="s-1")
    action, fields = platform.authorize(url)
    assert action == platform.tool_url + "/lti/launch" and fields["state"] == "s-1"
    claims = verify(platform, fields["id_token"])
    assert (claims["nonce"], claims["sub"], claims["given_name"]) == ("n-42", ADA.sub, "Ada")
    assert claims[LTI + "message_type"] == "LtiResourceLinkRequest" and claims[LTI + "version"] == "1.3.0"
    assert claims[LTI + "deployment_id"] == platform.deployment_id and claims[LTI + "roles"] == [LEARNER]
    assert claims[LTI + "resource_link"]["id"] == "link-7"
    assert claims[LTI + "context"]["id"] == platform.context_id
    ags = claims["https://purl.imsglobal.org/spec/lti-ags/claim/endpoint"]
    assert ags["lineitems"] == f"{platform.issuer}/contexts/{platform.context_id}/lineitems"
    assert claims["exp"] > time.time() >= claims["iat"] - 5


def test_a_deep_linking_launch_carries_its_settings(platform: Platform) -> None:
    claims = verify(platform, id_token(platform, message_type="LtiDeepLinkingRequest", resource_link_id=None))
    settings = claims[DL + "deep_linking_settings"]
    assert claims[LTI + "message_type"] == "LtiDeepLinkingRequest" and LTI + "resource_link" not in claims
    assert settings["deep_link_return_url"] == platform.issuer + "/deep_link_return"
    assert settings["accept_types"] == ["ltiResourceLink"] and isinstance(settings["data"], str)
    assert settings["accept_presentation_document_targets"] == ["iframe", "window"]


@pytest.mark.parametrize(
    ("tamper", "error"),
    [
        ("expired", jwt.ExpiredSignatureError),
        ("forged_signature", jwt.InvalidSignatureError),
        ("unknown_kid", jwt.PyJWKClientError),
        ("wrong_audience", jwt.InvalidAudienceError),
    ],
)
def test_a_tampered_id_token_fails_as_the_spec_requires(platform: Platform, tamper: str, error: type) -> None:
    token = id_token(platform, tamper=tamper)
    with pytest.raises(error):
        verify(platform, token)
    kids = [k["kid"] for k in HTTP.get(platform.jwks_url).json()["keys"]]
    assert (jwt.get_unverified_header(token)["kid"] in kids) is (tamper != "unknown_kid")


def test_an_unknown_deployment_is_otherwise_a_valid_launch(platform: Platform) -> None:
    claims = verify(platform, id_token(platform, tamper="unknown_deployment"))
    assert claims[LTI + "deployment_id"] not in ("", platform.deployment_id)


def test_a_token_request_the_tool_signed_gets_a_token_and_a_wrong_audience_does_not(
    tool: KeySetTool, platform: Platform
) -> None:
    granted = tool.token(platform, [SCORE])
    assert granted.status_code == 200, granted.text
    body = granted.json()
    assert (body["token_type"], body["expires_in"], body["scope"]) == ("bearer", 3600, SCORE) and body["access_token"]
    assert platform.token_requests[-1] == SCORE
    count = len(platform.token_requests)
    wrong = tool.token(platform, [SCORE], aud="https://elsewhere.example/token")
    assert wrong.status_code == 401 and "aud" in wrong.json()["error_description"]
    assert len(platform.token_requests) == count


def test_a_key_the_tool_rotated_is_fetched_once_more(tool: KeySetTool, platform: Platform) -> None:
    assert tool.token(platform, [SCORE]).status_code == 200
    fetches = platform.tool_jwks_fetches
    tool.keys.insert(0, KeyPair.generate())
    assert tool.token(platform, [SCORE]).status_code == 200
    assert tool.token(platform, [SCORE]).status_code == 200
    assert platform.tool_jwks_fetches == fetches + 1


def _score(user: str, given: float, maximum: float = 10) -> dict[str, Any]:
    return {
        "userId": user, "scoreGiven": given, "scoreMaximum": maximum, "activityProgress": "Completed",
        "gradingProgress": "FullyGraded", "timestamp": "2026-01-05T10:00:00.123+00:00",
    }  # fmt: skip


def _bearer(token: str, media: str) -> dict[str, str]:
    return {"authorization": f"Bearer {token}", "content-type": media}


SCORE_JSON = "application/vnd.ims.lis.v1.score+json"
LINEITEM_JSON = "application/vnd.ims.lis.v2.lineitem+json"


def _column(tool: KeySetTool, platform: Platform) -> tuple[str, str]:
    """A new line item, and a token that may post scores to it."""
    token = tool.token(platform, [LINEITEM, SCORE]).json()["access_token"]
    created = HTTP.post(
        f"{platform.issuer}/contexts/{platform.context_id}/lineitems",
        json={"label": "Quiz 1", "scoreMaximum": 10, "resourceId": "quiz:one"},
        headers=_bearer(token, LINEITEM_JSON),
    )
    assert created.status_code == 201, created.text
    return created.json()["id"], token


def test_a_score_needs_a_token_with_the_score_scope(tool: KeySetTool, platform: Platform) -> None:
    lineitem, token = _column(tool, platform)
    without = HTTP.post(lineitem + "/scores", json=_score(ADA.sub, 7), headers={"content-type": SCORE_JSON})
    assert without.status_code == 401
    forged = HTTP.post(lineitem + "/scores", json=_score(ADA.sub, 7), headers=_bearer(tool.sign({}), SCORE_JSON))
    assert forged.status_code == 401
    readonly = tool.token(platform, ["https://purl.imsglobal.org/spec/lti-ags/scope/result.readonly"])
    narrow = HTTP.post(
        lineitem + "/scores", json=_score(ADA.sub, 7), headers=_bearer(readonly.json()["access_token"], SCORE_JSON)
    )
    assert narrow.status_code == 403
    too_high = HTTP.post(lineitem + "/scores", json=_score(ADA.sub, 11), headers=_bearer(token, SCORE_JSON))
    assert too_high.status_code == 400 and "scoreMaximum" in too_high.text
    assert platform.latest_score(lineitem, ADA.sub) is None
    kept = HTTP.post(lineitem + "/scores", json=_score(ADA.sub, 7), headers=_bearer(token, SCORE_JSON))
    assert kept.status_code == 204 and platform.latest_score(lineitem, ADA.sub)["scoreGiven"] == 7  # type: ignore[index]


def test_a_deep_linking_answer_adds_a_link_and_its_line_item(tool: KeySetTool, platform: Platform) -> None:
    request = verify(platform, id_token(platform, message_type="LtiDeepLinkingRequest", resource_link_id=None))
    now = int(time.time())
    item = {
        "type": "ltiResourceLink", "title": "Ring all-reduce", "url": platform.tool_url + "/lti/launch",
        "custom": {"resource": "lab:ring"}, "lineItem": {"scoreMaximum": 5, "label": "Ring", "resourceId": "lab:ring"},
    }  # fmt: skip
    answer = {
        "iss": platform.client_id, "aud": platform.issuer, "iat": now, "exp": now + 300, "nonce": uuid.uuid4().hex,
        LTI + "message_type": "LtiDeepLinkingResponse", LTI + "version": "1.3.0",
        LTI + "deployment_id": platform.deployment_id, DL + "content_items": [item],
        DL + "data": request[DL + "deep_linking_settings"]["data"],
    }  # fmt: skip
    garbled = HTTP.post(platform.issuer + "/deep_link_return", data={"JWT": tool.sign({**answer, DL + "data": "x"})})
    assert garbled.status_code == 400 and "data" in garbled.text
    added = HTTP.post(platform.issuer + "/deep_link_return", data={"JWT": tool.sign(answer)})
    assert added.status_code == 200 and "1 items added" in added.text
    link = next(lid for lid, link in platform.resource_links.items() if link["custom"] == {"resource": "lab:ring"})
    column = next(li for li in platform.lineitems.values() if li.get("resourceLinkId") == link)
    assert (column["scoreMaximum"], column["resourceId"]) == (5, "lab:ring")
    launched = verify(platform, id_token(platform, resource_link_id=link))
    assert launched[LTI + "custom"] == {"resource": "lab:ring"}
    assert launched["https://purl.imsglobal.org/spec/lti-ags/claim/endpoint"]["lineitem"] == column["id"]
    replayed = HTTP.post(platform.issuer + "/deep_link_return", data={"JWT": tool.sign(answer)})
    assert replayed.status_code == 400 and "nonce" in replayed.text


def test_stop_and_start_keep_the_gradebook_and_the_port(tool: KeySetTool) -> None:
    lms = Platform(tool.url).start()
    try:
        lineitem, token = _column(tool, lms)
        assert HTTP.post(lineitem + "/scores", json=_score(ADA.sub, 4), headers=_bearer(token, SCORE_JSON)).is_success
        issuer = lms.issuer
        lms.stop()
        with pytest.raises(httpx.ConnectError):
            HTTP.get(lms.jwks_url)
        lms.start()
        assert lms.issuer == issuer and HTTP.get(lms.jwks_url).status_code == 200
        assert lms.latest_score(lineitem, ADA.sub)["scoreGiven"] == 4  # type: ignore[index]
        again = HTTP.post(lineitem + "/scores", json=_score(ADA.sub, 6), headers=_bearer(token, SCORE_JSON))
        assert again.status_code == 204 and len(lms.scores[lineitem.rsplit("/", 1)[-1]]) == 2
    finally:
        lms.stop()
