"""pylti1p3 fitted to FastAPI and our database, and hardened where the library is weak.

- ``Params``/``Jar``: the request's parameters and cookies in, the cookies to set out (``SameSite=None;
  Secure; Partitioned``: the launch happens inside the LMS's frame).
- ``Store``: the library's launch data storage in the ``lti_store`` table, shared by every web process.
  A nonce is deleted when it is checked, so a replayed launch is refused (the library only looks it up).
- ``ToolConf``: registrations and deployments from ``lti_platforms``, signed with our current key.
- ``Launch``: the audience is verified (the library turns that off), and an unknown key id refetches the
  platform's key set once (the library fails, or serves a stale cached set, until the cache expires).
- ``Connector``: access tokens cached per issuer + client id + scopes (the library's key is the issuer and
  scopes only), and a timeout on every HTTP call (the library sets none).

Every call here may block on the network: routes run it in their thread pool, never on the event loop.
"""

from __future__ import annotations

import hashlib
import threading
import time
from datetime import datetime, timedelta
from typing import Any, ClassVar

import jwt
import requests
from pylti1p3.cookie import CookieService
from pylti1p3.deployment import Deployment as LibDeployment
from pylti1p3.exception import LtiException
from pylti1p3.launch_data_storage.base import LaunchDataStorage
from pylti1p3.message_launch import MessageLaunch
from pylti1p3.oidc_login import OIDCLogin
from pylti1p3.redirect import Redirect
from pylti1p3.registration import Registration
from pylti1p3.request import Request as LibRequest
from pylti1p3.service_connector import ServiceConnector
from pylti1p3.session import SessionService
from pylti1p3.tool_config import ToolConfAbstract
from sqlalchemy import delete, select
from sqlalchemy.orm import Session
from starlette.responses import RedirectResponse, Response

from app.lti import keys
from app.lti.models import Deployment, Platform, StoredValue

TIMEOUT = (5, 15)  # seconds to connect, to read: an LMS that hangs must not hold a thread for ever
KEY_SET_LIFETIME = 3600  # a platform's key set is cached this long (and refetched on an unknown key id)
LEEWAY = 10  # seconds of clock difference allowed on exp/iat


class TimeoutSession(requests.Session):
    """A requests session whose every call has ``TIMEOUT`` unless the caller gives another."""

    def __init__(self) -> None:
        super().__init__()
        self.headers["User-Agent"] = "Ringlab-LTI"

    def request(self, method: Any, url: Any, *args: Any, **kwargs: Any) -> requests.Response:  # type: ignore[override]
        kwargs.setdefault("timeout", TIMEOUT)
        return super().request(method, url, *args, **kwargs)


class Params(LibRequest):
    """The request as the library reads it: query and form parameters, and whether it came over HTTPS."""

    def __init__(self, params: dict[str, str], *, secure: bool):
        self._params = params
        self._secure = secure

    @property
    def session(self) -> None:
        return None

    def is_secure(self) -> bool:
        return self._secure

    def get_param(self, key: str) -> str:
        return self._params.get(key) or ""


class Jar(CookieService):
    """Cookies read from the request and those the library sets, applied to the response afterwards."""

    def __init__(self, cookies: dict[str, str]):
        self._cookies = cookies
        self.to_set: list[tuple[str, str, int | None]] = []

    def _name(self, name: str) -> str:
        return f"{self._cookie_prefix}-{name}"

    def get_cookie(self, name: str) -> str | None:
        return self._cookies.get(self._name(name))

    def set_cookie(self, name: str, value: str | int, exp: int | None = 3600) -> None:
        self.to_set.append((self._name(name), str(value), exp))

    def apply(self, response: Response) -> Response:
        for name, value, exp in self.to_set:
            age = "" if exp is None else f"; Max-Age={exp}"
            # By hand: Starlette's ``partitioned`` needs Python 3.14. The launch comes inside the LMS's frame.
            attributes = "; Path=/; HttpOnly; SameSite=None; Secure; Partitioned"
            response.headers.append("set-cookie", f"{name}={value}{age}{attributes}")
        return response


class Store(LaunchDataStorage[Any]):
    """Launch state in ``lti_store``; its keys are random (state, nonce, launch id), so no session id."""

    def __init__(self, session: Session, now: datetime):
        super().__init__()
        self._session, self._now = session, now

    def get_session_cookie_name(self) -> str | None:
        return None

    def can_set_keys_expiration(self) -> bool:
        return True

    def _key(self, key: str) -> str:
        key = self._prepare_key(key)
        # Key-set URLs can be long; the table's key is at most 200 characters.
        return key if len(key) <= 200 else "h-" + hashlib.sha256(key.encode()).hexdigest()

    def get_value(self, key: str) -> Any:
        row = self._session.get(StoredValue, self._key(key))
        return row.value if row is not None and row.expires_at > self._now else None

    def set_value(self, key: str, value: Any, exp: int | None = None) -> None:
        expires = self._now + timedelta(seconds=exp or 86400)
        self._session.merge(StoredValue(key=self._key(key), value=value, expires_at=expires))
        self._session.flush()

    def remove_value(self, key: str) -> None:
        self._session.execute(delete(StoredValue).where(StoredValue.key == self._key(key)))

    def check_value(self, key: str) -> bool:
        k = self._key(key)
        if "-nonce-" in k:  # single use: whoever deletes it first launches; a replay finds nothing
            result = self._session.execute(
                delete(StoredValue).where(StoredValue.key == k, StoredValue.expires_at > self._now)
            )
            return int(getattr(result, "rowcount", 0) or 0) == 1
        return self.get_value(key) is not None


def purge_expired(*, session: Session, now: datetime) -> int:
    result = session.execute(delete(StoredValue).where(StoredValue.expires_at <= now))
    return int(getattr(result, "rowcount", 0) or 0)


def sessions(request: Params, store: Store) -> SessionService:
    service = SessionService(request)
    service.set_data_storage(store)
    return service


def registration(platform: Platform, *, session: Session, now: datetime) -> Registration:
    key = keys.signing_key(session=session, now=now)
    reg = Registration()
    reg.set_issuer(platform.issuer).set_client_id(platform.client_id)
    reg.set_auth_login_url(platform.auth_login_url).set_auth_token_url(platform.auth_token_url)
    reg.set_key_set_url(platform.key_set_url).set_key_set(None)
    if platform.auth_audience:
        reg.set_auth_audience(platform.auth_audience)
    reg.set_tool_private_key(key.private_pem).set_tool_public_key(keys.public_pem(key))
    return reg


class ToolConf(ToolConfAbstract[Params]):
    """Registrations from the database. Every issuer may have several client ids (the library's newer mode)."""

    def __init__(self, session: Session, now: datetime):
        self._session, self._now = session, now

    def check_iss_has_one_client(self, iss: str) -> bool:
        return False

    def find_registration_by_issuer(self, iss: str, *args: Any, **kwargs: Any) -> Registration:
        raise LtiException("Ringlab looks registrations up by issuer and client id.")

    def find_deployment(self, iss: str, deployment_id: str) -> LibDeployment | None:
        return None  # likewise: find_deployment_by_params

    def platform(self, iss: str, client_id: str | None) -> Platform | None:
        query = select(Platform).where(Platform.issuer == iss)
        if client_id:
            return self._session.scalars(query.where(Platform.client_id == client_id)).first()
        found = list(self._session.scalars(query.limit(2)))
        return found[0] if len(found) == 1 else None  # without a client id, only an unambiguous issuer

    def find_registration_by_params(  # type: ignore[override]
        self, iss: str, client_id: str | None, *args: Any, **kwargs: Any
    ) -> Registration | None:
        platform = self.platform(iss, client_id)
        return registration(platform, session=self._session, now=self._now) if platform else None

    def find_deployment_by_params(
        self, iss: str, deployment_id: str, client_id: str | None, *args: Any, **kwargs: Any
    ) -> LibDeployment | None:
        platform = self.platform(iss, client_id)
        if platform is None:
            return None
        known = self._session.scalars(
            select(Deployment).where(Deployment.platform_id == platform.id, Deployment.deployment_id == deployment_id)
        ).first()
        return LibDeployment().set_deployment_id(deployment_id) if known else None


class _Redirect(Redirect[Response]):
    def __init__(self, url: str):
        self._url = url

    def do_redirect(self) -> Response:
        return RedirectResponse(self._url, status_code=302)

    def do_js_redirect(self) -> Response:
        return self.do_redirect()

    def set_redirect_url(self, location: str) -> None:
        self._url = location

    def get_redirect_url(self) -> str:
        return self._url


class Login(OIDCLogin[Params, ToolConf, SessionService, Jar, Response]):
    def get_redirect(self, url: str) -> Redirect[Response]:
        return _Redirect(url)


class Connector(ServiceConnector):
    """Access tokens cached in the process per (issuer, client id, scopes), until a minute before they expire."""

    _tokens: ClassVar[dict[str, tuple[str, float]]] = {}
    _lock: ClassVar[threading.Lock] = threading.Lock()

    _local: ClassVar[threading.local] = threading.local()

    def __init__(self, registration: Registration, requests_session: requests.Session | None = None):
        super().__init__(registration, requests_session or self._session())

    @classmethod
    def _session(cls) -> requests.Session:
        """One HTTP session per thread: connections to an LMS are kept alive between scores."""
        session = getattr(cls._local, "session", None)
        if session is None:
            session = cls._local.session = TimeoutSession()
        return session

    def _scope_key(self, scopes: Any) -> str:
        parts = [self._registration.get_issuer() or "", self._registration.get_client_id() or "", *sorted(scopes)]
        return hashlib.sha256("\x1f".join(parts).encode()).hexdigest()

    def _get_cached_access_token(self, scope_key: str) -> str | None:
        with self._lock:
            token = self._tokens.get(scope_key)
        return token[0] if token is not None and token[1] > time.monotonic() else None

    def _cache_access_token(self, scope_key: str, access_token: str, expires_in: float) -> None:
        if expires_in and expires_in > 90:
            with self._lock:
                self._tokens[scope_key] = (access_token, time.monotonic() + float(expires_in) - 60)

    @classmethod
    def forget_tokens(cls) -> None:
        with cls._lock:
            cls._tokens.clear()


class Launch(MessageLaunch[Params, ToolConf, SessionService, Jar]):
    """A message launch, validated with the audience checked and one key-set refetch on an unknown key id."""

    def _get_request_param(self, key: str) -> str:
        return self._request.get_param(key)

    def get_public_key(self) -> tuple[str, str]:
        try:
            return super().get_public_key()  # type: ignore[no-any-return]
        except LtiException as first:
            if "Unable to find public key" not in str(first) or self._registration is None:
                raise
            # The platform may have rotated its key since we cached its set: fetch it once more, afresh.
            url = self._registration.get_key_set_url() or ""
            store = self._public_key_cache_data_storage
            if isinstance(store, Store):
                store.remove_value("key-set-url-" + hashlib.md5(url.encode()).hexdigest())
            self._registration.set_key_set(None)
            return super().get_public_key()  # type: ignore[no-any-return]

    def validate_registration(self) -> Launch:
        try:
            super().validate_registration()
        except LtiException as exc:
            if "Registration not found" not in str(exc) and "Client id not registered" not in str(exc):
                raise
            raise LtiException(
                f"The launch was not meant for Ringlab: its audience ({self.get_client_id()}) is no client id "
                f"registered for {self.get_iss()}."
            ) from exc
        return self

    def validate_jwt_signature(self) -> Launch:
        assert self._registration is not None
        public_key, alg = self.get_public_key()
        client_id = self._registration.get_client_id()
        try:
            body = jwt.decode(
                self._get_id_token(), public_key, algorithms=[alg], audience=client_id,
                issuer=self._registration.get_issuer(), leeway=LEEWAY,
                options={"require": ["exp", "iat", "aud", "iss"]},
            )  # fmt: skip
        except jwt.ExpiredSignatureError as exc:
            raise LtiException(
                "The launch has expired (its token's exp is in the past). Launch again from the LMS."
            ) from exc
        except jwt.InvalidAudienceError as exc:
            raise LtiException(
                "The launch was not meant for Ringlab (its audience is another tool's client id)."
            ) from exc
        except jwt.InvalidTokenError as exc:
            raise LtiException(f"The launch's signature or claims are not valid: {exc}.") from exc
        aud = body.get("aud")
        if isinstance(aud, list) and len(aud) > 1 and body.get("azp") != client_id:
            raise LtiException("The launch names several audiences and its azp is not Ringlab's client id.")
        return self


def launch(
    params: dict[str, str], cookies: dict[str, str], *, secure: bool, session: Session, now: datetime
) -> tuple[Launch, Jar, Store]:
    """A Launch over this request, not yet validated (``validate()`` does, consuming the nonce)."""
    request, jar, store = Params(params, secure=secure), Jar(cookies), Store(session, now)
    message = Launch(
        request, ToolConf(session, now), session_service=sessions(request, store), cookie_service=jar,
        requests_session=TimeoutSession(), service_connector_cls=Connector,
    )  # fmt: skip
    message.set_public_key_caching(store, cache_lifetime=KEY_SET_LIFETIME)
    return message, jar, store


def restored(launch_id: str, *, session: Session, now: datetime) -> Launch:
    """A launch validated earlier in this flow (deep linking, a first launch's choices), from the store."""
    request, jar, store = Params({}, secure=True), Jar({}), Store(session, now)
    return Launch.from_cache(  # type: ignore[return-value]
        launch_id, request, ToolConf(session, now), session_service=sessions(request, store), cookie_service=jar,
        launch_data_storage=store, requests_session=TimeoutSession(), service_connector_cls=Connector,
    )  # fmt: skip


def login(params: dict[str, str], *, secure: bool, session: Session, now: datetime) -> tuple[Login, Jar]:
    request, jar, store = Params(params, secure=secure), Jar({}), Store(session, now)
    return Login(request, ToolConf(session, now), session_service=sessions(request, store), cookie_service=jar), jar
