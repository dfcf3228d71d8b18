"""A throwaway PostgreSQL cluster for the test suite (Debian's `postgresql` package).

initdb refuses to run as root, so as root the cluster runs as the `postgres`
system user that the package creates.
"""

from __future__ import annotations

import contextlib
import glob
import os
import shutil
import socket
import subprocess
from pathlib import Path

import psycopg


def _bin_dir() -> Path | None:
    found = sorted(glob.glob("/usr/lib/postgresql/*/bin/initdb"), key=lambda p: int(p.split("/")[4]))
    if found:
        return Path(found[-1]).parent
    initdb = shutil.which("initdb")
    return Path(initdb).parent if initdb else None


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class PostgresCluster:
    def __init__(self, base: Path):
        self.base = base
        self.data = base / "data"
        self.sockets = base / "sock"
        self.port = _free_port()
        bin_dir = _bin_dir()
        if bin_dir is None:
            raise RuntimeError(
                "PostgreSQL server binaries not found. scripts/test.sh installs Debian's `postgresql`; "
                "or run with RINGLAB_TEST_BACKENDS=sqlite."
            )
        self.bin = bin_dir
        self.as_postgres = os.geteuid() == 0

    def _run(self, *args: str) -> None:
        cmd = [str(self.bin / args[0]), *args[1:]]
        if self.as_postgres:
            cmd = ["runuser", "-u", "postgres", "--", *cmd]
        done = subprocess.run(cmd, capture_output=True, text=True)
        if done.returncode != 0:
            raise RuntimeError(f"{' '.join(cmd)} failed ({done.returncode}):\n{done.stdout}{done.stderr}")

    def start(self) -> None:
        self.sockets.mkdir(parents=True, exist_ok=True)
        if self.as_postgres:
            shutil.chown(self.base, "postgres", "postgres")
            shutil.chown(self.sockets, "postgres", "postgres")
        self._run(
            "initdb", "-D", str(self.data), "-A", "trust", "-U", "ringlab", "-E", "UTF8", "--locale=C", "--no-sync"
        )
        options = (
            f"-p {self.port} -k {self.sockets} -c listen_addresses=127.0.0.1 "
            "-c fsync=off -c synchronous_commit=off -c full_page_writes=off -c max_connections=200"
        )
        self._run("pg_ctl", "-D", str(self.data), "-l", str(self.base / "server.log"), "-w", "-o", options, "start")

    def stop(self) -> None:
        with contextlib.suppress(RuntimeError):
            self._run("pg_ctl", "-D", str(self.data), "-m", "immediate", "-w", "stop")

    def create_database(self, name: str, template: str | None = None) -> str:
        """Create database ``name`` (a copy of database ``template``, if given) and return its SQLAlchemy URL."""
        with psycopg.connect(f"host=127.0.0.1 port={self.port} user=ringlab dbname=postgres", autocommit=True) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{name}"')
            conn.execute(f'CREATE DATABASE "{name}"' + (f' TEMPLATE "{template}"' if template else ""))
        return f"postgresql+psycopg://ringlab@127.0.0.1:{self.port}/{name}"
