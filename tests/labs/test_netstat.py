"""The zygote's byte counts over loopback: read from the kernel, and kept for a socket freed between reads."""

from __future__ import annotations

import os
import socket
import threading
from collections.abc import Callable

from labs.rank import netstat
from labs.rank.window import Window

PAYLOAD = 300_000


def exchange(listening: Callable[[], object] = lambda: None) -> None:
    """One connection opened, used and closed: the client sends PAYLOAD bytes, the server answers 1,000;
    ``listening`` is called once the server listens, before the client connects."""
    server = socket.create_server(("127.0.0.1", 0))
    port = server.getsockname()[1]
    listening()

    def serve() -> None:
        conn, _ = server.accept()
        with conn:
            while conn.recv(1 << 20):
                pass
            conn.sendall(b"s" * 1000)

    thread = threading.Thread(target=serve)
    thread.start()
    with socket.create_connection(("127.0.0.1", port)) as client:
        client.sendall(b"c" * PAYLOAD)
        client.shutdown(socket.SHUT_WR)
        while client.recv(1 << 16):
            pass
    thread.join()
    server.close()


def test_a_connection_made_and_closed_between_two_reads_keeps_its_bytes() -> None:
    """Both ends are counted from the kernel's announcements; no read saw either, so neither has an owner."""
    window = Window(0)  # no poll until close: the connection lives and dies between the two reads
    exchange()
    by_uid, loopback = window.close()
    assert os.getuid() not in by_uid
    unknown = by_uid[netstat.UNKNOWN]
    assert PAYLOAD + 1000 <= sum(unknown.values()) < PAYLOAD + 1000 + 4096  # both ends, counted once each
    assert loopback >= PAYLOAD


def test_a_freed_socket_on_a_port_a_read_saw_is_owned() -> None:
    """The accepted socket shares the listener's port, which a read saw: the server's bytes are its owner's;
    the client's ephemeral port was never seen, so its bytes stay unattributed (to an unknown peer)."""
    window = Window(0)
    exchange(listening=lambda: window.poll(force=True))
    by_uid, _ = window.close()
    me = os.getuid()
    assert 1000 <= by_uid[me][netstat.UNKNOWN] < 1000 + 4096
    assert PAYLOAD <= by_uid[netstat.UNKNOWN][me] < PAYLOAD + 4096


def test_without_the_kernels_announcements_the_bytes_would_be_lost() -> None:
    """What the announcements are for: the counters of a freed socket are gone from the next read."""
    before = netstat.snapshot()
    exchange()
    assert netstat.traffic(before, netstat.snapshot()).get(os.getuid(), {}).get(os.getuid(), 0) < PAYLOAD


def test_an_open_connection_is_counted_by_the_reads() -> None:
    window = Window(0)
    server = socket.create_server(("127.0.0.1", 0))
    with server, socket.create_connection(server.getsockname()) as a, server.accept()[0] as b:
        a.sendall(b"x" * 5000)
        assert len(b.recv(1 << 16)) > 0
        window.poll(force=True)
        by_uid, _ = window.close()
    assert by_uid[os.getuid()][os.getuid()] >= 5000
