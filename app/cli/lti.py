"""`ringlab lti`: register LMS platforms, rotate Ringlab's signing key, connect LMS courses, send scores.

Registration is two-sided: the LMS admin registers Ringlab as a tool (the URLs `add-platform` prints),
and gets from the LMS an issuer, a client id, a deployment id and three URLs, which `add-platform` records.
"""

from __future__ import annotations

from typing import Annotated

import typer

from app.cli.courses import _session

app = typer.Typer(help="LMS integration (LTI 1.3): platforms, keys, course links, grade sending.", no_args_is_help=True)

TOOL_URL = typer.Option(help="Ringlab's public address, as the LMS's browsers reach it.", envvar="RINGLAB_PUBLIC_URL")


def tool_urls(tool_url: str) -> dict[str, str]:
    base = tool_url.rstrip("/")
    return {
        "OIDC login (initiation) URL": f"{base}/lti/login",
        "Redirect / launch URL (also the target link URI)": f"{base}/lti/launch",
        "Deep linking URL": f"{base}/lti/launch",
        "Public keyset (JWKS) URL": f"{base}/lti/jwks.json",
    }


@app.command("add-platform")
def add_platform(
    issuer: Annotated[str, typer.Option(help="The platform's issuer (iss), e.g. https://canvas.instructure.com.")],
    client_id: Annotated[str, typer.Option(help="The client id the LMS gave Ringlab.")],
    auth_login_url: Annotated[str, typer.Option(help="The LMS's OIDC authorization endpoint.")],
    auth_token_url: Annotated[str, typer.Option(help="The LMS's OAuth 2 token endpoint.")],
    key_set_url: Annotated[str, typer.Option(help="The LMS's public keyset (JWKS) URL.")],
    deployment: Annotated[list[str], typer.Option(help="A deployment id (repeat for several).")],
    name: Annotated[str, typer.Option(help="A name for people: 'Canvas (State U)'.")] = "",
    auth_audience: Annotated[
        str, typer.Option(help="The token endpoint's audience, if not its URL (Moodle, D2L).")
    ] = "",
    frame_origin: Annotated[
        list[str] | None, typer.Option(help="An origin that shows Ringlab in a frame (repeat).")
    ] = None,
    tool_url: Annotated[str, TOOL_URL] = "http://127.0.0.1:8000",
) -> None:
    """Register an LMS (or update its registration: same issuer and client id), then print what to paste there."""
    from app.db import utcnow
    from app.lti import registry

    reg = registry.Registration(
        issuer, client_id, auth_login_url, auth_token_url, key_set_url, deployment, name, auth_audience,
        frame_origin or [],
    )  # fmt: skip
    with _session() as session:
        platform, created = registry.register(reg, session=session, now=utcnow())
        typer.echo(f"{'registered' if created else 'updated'} {platform.name}: issuer {issuer}, client id {client_id}")
    _print_tool_urls(tool_url)


def _print_tool_urls(tool_url: str) -> None:
    typer.echo("Give the LMS these (the same for every LMS):")
    for label, url in tool_urls(tool_url).items():
        typer.echo(f"  {label}: {url}")


@app.command("list")
def list_platforms() -> None:
    """Every registered LMS: name, issuer, client id, deployments, connected LMS courses."""
    from sqlalchemy import func, select

    from app.lti.models import ContextLink, Deployment, Platform

    with _session() as session:
        platforms = list(session.scalars(select(Platform).order_by(Platform.id)))
        if not platforms:
            typer.echo("no LMS registered (ringlab lti add-platform)")
        for p in platforms:
            deployments = ", ".join(
                session.scalars(select(Deployment.deployment_id).where(Deployment.platform_id == p.id))
            )
            linked = session.scalar(
                select(func.count())
                .select_from(ContextLink)
                .where(ContextLink.platform_id == p.id, ContextLink.course_id.is_not(None))
            )
            typer.echo(f"{p.name}\t{p.issuer}\tclient {p.client_id}\tdeployments {deployments}\t{linked} course(s)")


@app.command("tool-config")
def tool_config(tool_url: Annotated[str, TOOL_URL] = "http://127.0.0.1:8000") -> None:
    """Print the URLs an LMS administrator enters when registering Ringlab."""
    _print_tool_urls(tool_url)


@app.command("rotate-key")
def rotate_key() -> None:
    """Make a new signing key; the old one stays published for an hour, until what it signed has expired."""
    from app.db import utcnow
    from app.lti import keys

    with _session() as session:
        key, retired = keys.rotate(session=session, now=utcnow())
        typer.echo(f"signing with key {key.kid}; retired {', '.join(retired) or 'none'} (published until expiry)")


@app.command("link-context")
def link_context(
    issuer: Annotated[str, typer.Option(help="The platform's issuer.")],
    client_id: Annotated[str, typer.Option(help="Its client id.")],
    context: Annotated[str, typer.Option(help="The LMS course's id (the launch's context id).")],
    course: Annotated[str, typer.Option(help="The Ringlab course's id.")],
) -> None:
    """Connect an LMS course to a Ringlab course before anyone launches (an administrator's shortcut)."""
    from sqlalchemy import select

    from app.courses import members, service
    from app.db import utcnow
    from app.errors import NotFound
    from app.lti.models import ContextLink, Platform

    with _session() as session:
        platform = session.scalars(
            select(Platform).where(Platform.issuer == issuer, Platform.client_id == client_id)
        ).first()
        if platform is None:
            raise_missing = NotFound(f"No LMS is registered with issuer {issuer} and client id {client_id}.")
            typer.echo(f"error: {raise_missing.message}", err=True)
            raise typer.Exit(1)
        service.get_course(course, session=session)
        row = session.scalars(
            select(ContextLink).where(ContextLink.platform_id == platform.id, ContextLink.context_id == context)
        ).first()
        if row is None:
            row = ContextLink(platform_id=platform.id, context_id=context, title=context, ags_scopes=[])
            session.add(row)
        row.course_id = course
        members.audit(
            members.TERMINAL, "lti.context.link", session=session, now=utcnow(), course=course, context=context
        )
        typer.echo(f"LMS course {context} of {platform.name} is Ringlab course '{course}'")


@app.command("send")
def send() -> None:
    """Send every score LMS gradebooks are owed now (what each web process also does every few seconds)."""
    from app.config import get_settings
    from app.db import make_engine, make_sessionmaker
    from app.lti import sender

    engine = make_engine(get_settings().sqlalchemy_url)
    try:
        total = 0
        while n := sender.drain(make_sessionmaker(engine)):
            total += n
        typer.echo(f"{total} score(s) tried")
    finally:
        engine.dispose()
