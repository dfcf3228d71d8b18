"""create_app(): wires settings, database, routers, middleware and start-up."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import asynccontextmanager

import anyio.to_thread
from fastapi import FastAPI
from fastapi.staticfiles import StaticFiles
from uvicorn.middleware.proxy_headers import ProxyHeadersMiddleware

from app.accounts.admin_views import router as admin_users_router
from app.accounts.api import router as accounts_api
from app.accounts.flows import AuthLimits
from app.accounts.recovery_views import router as recovery_router
from app.accounts.views import router as accounts_router
from app.config import REPO_ROOT, Settings, get_settings
from app.content.service import sync_directory
from app.content.source import ContentError
from app.courses.views import router as courses_router
from app.db import make_engine, make_sessionmaker
from app.exercises.api import router as exercises_api
from app.exercises.views import router as exercises_router
from app.flashcards.api import router as flashcards_api
from app.flashcards.mine_views import router as flashcards_mine_router
from app.flashcards.views import router as flashcards_router
from app.instructors.api import router as instructors_api
from app.instructors.views import router as instructors_router
from app.labs import watch
from app.labs.api import router as labs_api
from app.labs.views import router as labs_router
from app.lti import sender as lti_sender
from app.lti.staff_views import router as lti_staff_router
from app.lti.views import router as lti_router
from app.quizzes.api import router as quizzes_api
from app.quizzes.views import router as quizzes_router
from app.reports.staff import router as reports_staff_router
from app.reports.views import router as reports_router
from app.web import errors, openapi
from app.web.auth import AuthMiddleware
from app.web.csrf import CSRFMiddleware
from app.web.health import WriteProbe
from app.web.pages import router as pages_router
from app.web.security import SecurityHeaders

log = logging.getLogger("ringlab")


def create_app(settings: Settings | None = None) -> FastAPI:
    settings = settings or get_settings()
    engine = make_engine(settings.sqlalchemy_url)

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        anyio.to_thread.current_default_thread_limiter().total_tokens = settings.thread_count
        if settings.sync_content_on_start:
            try:
                report = sync_directory(settings.content_dir, app.state.sessionmaker)
                log.info("content synced: %s", report.summary())
            except ContentError as exc:
                # Keep serving what is already loaded; the problems are for the author.
                log.error("content not synced, still serving the last good content:\n%s", exc)
        app.state.lti_sender = asyncio.create_task(lti_sender.run(app.state.sessionmaker, settings.lti_send_every))
        watch.close_on_exit(app.state.watch)
        yield
        app.state.watch.close()
        app.state.lti_sender.cancel()
        if app.state.writer_thread is not None:
            app.state.writer_thread.shutdown()
        engine.dispose()

    app = FastAPI(title="Ringlab", version="0.1.0", lifespan=lifespan, docs_url=None, redoc_url=None)
    app.state.settings = settings
    app.state.engine = engine
    app.state.sessionmaker = make_sessionmaker(engine)
    app.state.readers = make_sessionmaker(engine, read_only=True)
    app.state.watch = watch.Watch(lambda: app.state.readers)  # held polls of waiting submissions (?wait=)
    sqlite = engine.dialect.name == "sqlite"
    app.state.write_turns = asyncio.Lock() if sqlite else None
    app.state.writer_thread = ThreadPoolExecutor(1, thread_name_prefix="sqlite-writer") if sqlite else None
    app.state.inline_reads = sqlite  # see ApiCall.quick_read
    app.state.limits = AuthLimits.from_settings(settings)
    app.state.health_probe = WriteProbe()
    # Added last runs first: headers wrap everything, then CSRF and body size, then who is asking
    # (its database lookup guarded: a database restarting is a 503, app.web.errors).
    app.add_middleware(AuthMiddleware)
    app.add_middleware(errors.DatabaseGuard)
    # The LMS posts the launch from its own site: login and launch are checked by OIDC state and nonce instead.
    app.add_middleware(
        CSRFMiddleware, max_body=settings.max_body_bytes, exempt_prefixes=("/api/", "/lti/login", "/lti/launch")
    )
    app.add_middleware(SecurityHeaders)
    if proxies := [p.strip() for p in settings.trusted_proxies.split(",") if p.strip()]:
        # Outermost: the client's address and scheme are settled before anything reads them.
        app.add_middleware(ProxyHeadersMiddleware, trusted_hosts=proxies)
    app.mount("/static", StaticFiles(directory=REPO_ROOT / "static"), name="static")
    errors.install(app)
    openapi.install(app)
    routers = (
        pages_router, accounts_router, recovery_router, accounts_api, quizzes_router, quizzes_api, exercises_router,
        exercises_api, flashcards_mine_router, flashcards_router, flashcards_api, labs_router, labs_api,
        instructors_router, instructors_api, reports_router, reports_staff_router, courses_router,
        admin_users_router, lti_router, lti_staff_router,
    )  # fmt: skip
    for router in routers:
        # Flat, as include_router left them before FastAPI 0.137: it now keeps each router as a
        # lazily resolved node that every request scans route by route, whatever its prefix
        # (fastapi/fastapi#16159), which cost more than the rest of a JSON request. Each route
        # already carries its router's prefix and tags.
        app.router.routes.extend(router.routes)
    return app
