"""Where the client keeps its server and token: $XDG_CONFIG_HOME/ringlab/client.json, mode 0600.

``RINGLAB_SERVER`` and ``RINGLAB_TOKEN`` in the environment override what the file says.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from dataclasses import asdict, dataclass
from pathlib import Path


@dataclass(frozen=True)
class ClientConfig:
    server: str | None = None
    token: str | None = None
    username: str | None = None


def config_path(env: Mapping[str, str]) -> Path:
    """The config file: under $XDG_CONFIG_HOME if set (and absolute), else ~/.config."""
    xdg = env.get("XDG_CONFIG_HOME", "")
    base = Path(xdg) if xdg and Path(xdg).is_absolute() else Path(env.get("HOME") or Path.home()) / ".config"
    return base / "ringlab" / "client.json"


def normalise_server(url: str) -> str:
    """The server's base URL without a trailing slash; a bare host gets http://."""
    url = url.strip().rstrip("/")
    if url and "://" not in url:
        url = "http://" + url
    return url


def read_file(path: Path) -> ClientConfig:
    """What the file holds; an absent or unreadable file holds nothing."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return ClientConfig()
    if not isinstance(data, dict):
        return ClientConfig()
    return ClientConfig(**{k: data[k] for k in ("server", "token", "username") if isinstance(data.get(k), str)})


def load(env: Mapping[str, str]) -> ClientConfig:
    """The file's server and token, each overridden by RINGLAB_SERVER / RINGLAB_TOKEN when set."""
    found = read_file(config_path(env))
    server = env.get("RINGLAB_SERVER") or found.server
    return ClientConfig(
        server=normalise_server(server) if server else None,
        token=env.get("RINGLAB_TOKEN") or found.token,
        username=found.username if not env.get("RINGLAB_TOKEN") else None,
    )


def save(config: ClientConfig, env: Mapping[str, str]) -> Path:
    """Write the file readable by its owner only (0600; its folder 0700), replacing what was there."""
    path = config_path(env)
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    os.fchmod(fd, 0o600)  # an older file keeps its mode through O_CREAT: the token is a password
    with os.fdopen(fd, "w", encoding="utf-8") as out:
        json.dump({k: v for k, v in asdict(config).items() if v is not None}, out, indent=2)
        out.write("\n")
    return path
