"""Settings, read once from the environment (prefix ``RINGLAB_``, plus ``DATABASE_URL``)."""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path

from pydantic import AliasChoices, Field
from pydantic_settings import BaseSettings, SettingsConfigDict

from app.paths import DEFAULTS, ENV_FILE, ENV_PREFIX, REPO_ROOT

__all__ = ["REPO_ROOT", "Settings", "get_settings"]


class Settings(BaseSettings):
    model_config = SettingsConfigDict(env_prefix=ENV_PREFIX, env_file=ENV_FILE, extra="ignore")

    # Read without this class by `ringlab content check` (app.paths): change them there.
    data_dir: Path = DEFAULTS["data_dir"]
    database_url: str = Field(default="", validation_alias=AliasChoices("DATABASE_URL", "RINGLAB_DATABASE_URL"))
    content_dir: Path = DEFAULTS["content_dir"]
    sync_content_on_start: bool = True
    # A course can stay closed to strangers: sign-up then asks for this code.
    join_code: str | None = None
    session_ttl_hours: int = 24 * 14
    api_token_ttl_hours: int = 24 * 30
    max_body_bytes: int = 1024 * 1024
    signin_limit_per_client: int = 20  # attempts per 5 minutes
    signin_limit_per_account: int = 10  # failed attempts per 15 minutes
    signup_limit_per_client: int = 10  # accounts per hour
    # Proxies whose X-Forwarded-For / X-Forwarded-Proto are believed (comma-separated addresses
    # or networks, "*" for any). Empty: the peer's own address is the client, whatever the
    # headers say, so a client cannot pick the address its rate limits count against.
    trusted_proxies: str = ""
    # Worker threads per web process for blocking work (sync routes, database sessions); 0
    # picks one for the database. On SQLite that work is CPU in Python: threads beyond a
    # few only fight over the interpreter lock. PostgreSQL work waits on the network.
    web_threads: int = Field(default=0, ge=0, le=1000)
    # How often each web process sends the scores LMS gradebooks are owed (app.lti.sender); 0: never (a
    # deployment may leave it to one process, or to `ringlab lti send`).
    lti_send_every: float = Field(default=5.0, ge=0)

    @property
    def thread_count(self) -> int:
        if self.web_threads:
            return self.web_threads
        return 4 if self.sqlalchemy_url.startswith("sqlite") else 40

    @property
    def sqlalchemy_url(self) -> str:
        """DATABASE_URL if set, else a SQLite file in the data directory."""
        if self.database_url:
            url = self.database_url
            # Plain postgresql:// URLs mean psycopg 3 here, the driver we ship.
            if url.startswith("postgresql://") or url.startswith("postgres://"):
                url = "postgresql+psycopg://" + url.split("://", 1)[1]
            return url
        return f"sqlite:///{self.data_dir / 'ringlab.sqlite3'}"


@lru_cache
def get_settings() -> Settings:
    return Settings()
