"""The client's config file: where it lives, who can read it, and what the environment overrides."""

from __future__ import annotations

import stat
from pathlib import Path

from app.client.config import ClientConfig, config_path, load, normalise_server, save


def test_the_file_follows_xdg_and_falls_back_to_dot_config(tmp_path: Path) -> None:
    assert config_path({"XDG_CONFIG_HOME": str(tmp_path)}) == tmp_path / "ringlab" / "client.json"
    assert config_path({"HOME": str(tmp_path)}) == tmp_path / ".config" / "ringlab" / "client.json"
    assert config_path({"HOME": str(tmp_path), "XDG_CONFIG_HOME": "relative"}).is_relative_to(tmp_path / ".config")


def test_saved_tokens_are_readable_by_their_owner_only_even_over_an_open_file(tmp_path: Path) -> None:
    env = {"XDG_CONFIG_HOME": str(tmp_path)}
    path = config_path(env)
    path.parent.mkdir(parents=True)
    path.write_text("{}")
    path.chmod(0o644)
    save(ClientConfig(server="http://h:8000", token="secret", username="ada"), env)
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert load(env) == ClientConfig(server="http://h:8000", token="secret", username="ada")


def test_the_environment_overrides_the_file(tmp_path: Path) -> None:
    env = {"XDG_CONFIG_HOME": str(tmp_path)}
    save(ClientConfig(server="http://h:8000", token="secret", username="ada"), env)
    over = load({**env, "RINGLAB_SERVER": "https://other.example/", "RINGLAB_TOKEN": "t2"})
    assert over == ClientConfig(server="https://other.example", token="t2", username=None)


def test_no_file_or_a_broken_one_means_not_signed_in(tmp_path: Path) -> None:
    env = {"XDG_CONFIG_HOME": str(tmp_path)}
    assert load(env) == ClientConfig()
    config_path(env).parent.mkdir(parents=True)
    config_path(env).write_text("not json")
    assert load(env) == ClientConfig()


def test_server_addresses_are_normalised() -> None:
    assert normalise_server(" ringlab.example.edu/ ") == "http://ringlab.example.edu"
    assert normalise_server("https://ringlab.example.edu/") == "https://ringlab.example.edu"
