"""Bytes on the wire, read from the kernel rather than from the ranks.

Runs in the zygote, inside the sandbox's own network namespace, where the only
traffic is the ranks' gloo and store connections over loopback. Each rank runs
as its own uid, so the kernel's per-socket counters (``sock_diag``, the netlink
interface ``ss`` uses) attribute every TCP byte to the rank that sent it and
the rank that received it. Student code cannot lie to these counters, nor hide
them by closing a socket: the kernel announces every TCP socket it frees, with
its last counters, to a listener on the ``sock_diag`` destroy groups (what
``ss -E`` shows), and the loopback device total (``/proc/net/dev``) is the
backstop for anything neither saw. Stdlib only: mounted into the sandbox.
"""

from __future__ import annotations

import socket
import struct

NETLINK_SOCK_DIAG = 4
SOCK_DIAG_BY_FAMILY = 20
NLM_F_REQUEST, NLM_F_DUMP = 0x1, 0x300
NLMSG_ERROR, NLMSG_DONE = 2, 3
SKNLGRP_INET_TCP_DESTROY, SKNLGRP_INET6_TCP_DESTROY = 1, 3  # linux/sock_diag.h: freed TCP sockets, v4 and v6
INET_DIAG_INFO = 2
NLMSG = struct.Struct("=IHHII")
REQ = struct.Struct("=BBBxI HH 16s16s I 8s")
MSG = struct.Struct("=BBBB HH 16s16s I 8s IIIII")
RTA = struct.Struct("=HH")
# Offsets into struct tcp_info (linux/tcp.h); bytes_sent and bytes_retrans need Linux >= 4.19.
TCPI_BYTES_ACKED, TCPI_BYTES_SENT, TCPI_BYTES_RETRANS = 120, 200, 208

TCP_TIME_WAIT, TCP_NEW_SYN_RECV = 6, 12  # linux/tcp_states.h: sockets the kernel reports with uid 0, no counters
UNKNOWN = -1  # the owner of a socket freed before any read saw it (the kernel's announcement names none)
Conn = tuple[int, int, int]  # (local port, remote port, socket cookie): one socket, even if its ports are reused


def tcp_sockets() -> list[dict[str, int]]:
    """Every TCP socket (IPv4 and IPv6) in this network namespace: ports, owner uid, bytes sent."""
    return _dump(socket.AF_INET) + _dump(socket.AF_INET6)


def _dump(family: int) -> list[dict[str, int]]:
    sock = socket.socket(socket.AF_NETLINK, socket.SOCK_DGRAM, NETLINK_SOCK_DIAG)
    try:
        req = REQ.pack(family, socket.IPPROTO_TCP, 1 << (INET_DIAG_INFO - 1), 0xFFFFFFFF, 0, 0, b"", b"", 0, b"")
        sock.send(NLMSG.pack(NLMSG.size + len(req), SOCK_DIAG_BY_FAMILY, NLM_F_REQUEST | NLM_F_DUMP, 1, 0) + req)
        out: list[dict[str, int]] = []
        while True:
            for kind, body in _messages(sock.recv(1 << 16)):
                if kind == NLMSG_DONE:
                    return out
                if kind == NLMSG_ERROR:
                    raise OSError("sock_diag request failed")
                out.append(_parse(body))
    finally:
        sock.close()


def _messages(data: bytes) -> list[tuple[int, bytes]]:
    """The netlink messages in one datagram: (type, body)."""
    out, offset = [], 0
    while offset + NLMSG.size <= len(data):
        length, kind, _, _, _ = NLMSG.unpack_from(data, offset)
        if length < NLMSG.size:
            break
        out.append((kind, data[offset + NLMSG.size : offset + length]))
        offset += (length + 3) & ~3
    return out


def port_owners(sockets: list[dict[str, int]]) -> dict[int, int]:
    """Local port -> owner uid, from full sockets only (listening ones included: a socket ``accept`` makes
    shares its listener's port); a socket in TIME_WAIT or a pending connection reports no owner."""
    return {s["sport"]: s["uid"] for s in sockets if s["state"] not in (TCP_TIME_WAIT, TCP_NEW_SYN_RECV)}


def freed_listener() -> socket.socket | None:
    """A non-blocking netlink socket to which the kernel sends each TCP socket of this namespace as it frees it,
    with its last counters (needs no privilege; None where the kernel has no such groups)."""
    groups = (1 << (SKNLGRP_INET_TCP_DESTROY - 1)) | (1 << (SKNLGRP_INET6_TCP_DESTROY - 1))
    sock = socket.socket(socket.AF_NETLINK, socket.SOCK_DGRAM, NETLINK_SOCK_DIAG)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4 << 20)
        sock.bind((0, groups))
        sock.setblocking(False)
    except OSError:
        sock.close()
        return None
    return sock


def freed(listener: socket.socket) -> tuple[dict[Conn, tuple[int, int]], bool]:
    """The sockets freed since the last call, as ``snapshot`` gives them but with the owner ``UNKNOWN`` (the
    announcement leaves it out), and whether the kernel dropped any announcement (the listener's buffer was
    full)."""
    out: dict[Conn, tuple[int, int]] = {}
    dropped = False
    while True:
        try:
            data = listener.recv(1 << 16)
        except BlockingIOError:
            return out, dropped
        except OSError:  # ENOBUFS: announcements were lost; the ones after it still come
            dropped = True
            continue
        for kind, body in _messages(data):
            if kind == SOCK_DIAG_BY_FAMILY:
                s = _parse(body)
                if s["dport"]:
                    out[(s["sport"], s["dport"], s["cookie"])] = (UNKNOWN, s["sent"])


def _parse(body: bytes) -> dict[str, int]:
    fields = MSG.unpack_from(body)
    sport, dport = socket.ntohs(fields[4]), socket.ntohs(fields[5])
    uid, cookie = fields[13], int.from_bytes(fields[9], "little")
    sent = 0
    offset = MSG.size
    while offset + RTA.size <= len(body):
        rlen, rtype = RTA.unpack_from(body, offset)
        if rlen < RTA.size:
            break
        if rtype == INET_DIAG_INFO:
            info = body[offset + RTA.size : offset + rlen]
            if len(info) >= TCPI_BYTES_RETRANS + 8:  # payload bytes sent once: retransmissions are not traffic
                sent = struct.unpack_from("=Q", info, TCPI_BYTES_SENT)[0]
                sent -= struct.unpack_from("=Q", info, TCPI_BYTES_RETRANS)[0]
            else:
                sent = struct.unpack_from("=Q", info, TCPI_BYTES_ACKED)[0]
        offset += (rlen + 3) & ~3
    return {"sport": sport, "dport": dport, "uid": uid, "sent": sent, "cookie": cookie, "state": fields[1]}


def snapshot(sockets: list[dict[str, int]] | None = None) -> dict[Conn, tuple[int, int]]:
    """Per connection socket (local port, remote port, cookie): (owner uid, bytes sent so far); of ``sockets``
    (``tcp_sockets()``'s list) if given, else read now."""
    live = tcp_sockets() if sockets is None else sockets
    return {(s["sport"], s["dport"], s["cookie"]): (s["uid"], s["sent"]) for s in live if s["dport"]}


def traffic(before: dict[Conn, tuple[int, int]], after: dict[Conn, tuple[int, int]]) -> dict[int, dict[int, int]]:
    """Bytes each uid sent to each peer uid between two snapshots."""
    owner = {conn[:2]: uid for conn, (uid, _) in after.items()}
    out: dict[int, dict[int, int]] = {}
    for conn, (uid, sent) in after.items():
        delta = sent - before.get(conn, (uid, 0))[1]
        if delta <= 0:
            continue
        peer = owner.get((conn[1], conn[0]), -1)
        out.setdefault(uid, {}).setdefault(peer, 0)
        out[uid][peer] += delta
    return out


def loopback_tx_bytes() -> int:
    """Total bytes sent over this namespace's loopback device, headers included."""
    with open("/proc/net/dev") as f:
        for line in f:
            name, _, rest = line.partition(":")
            if name.strip() == "lo":
                return int(rest.split()[8])
    return 0
