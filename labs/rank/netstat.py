"""Bytes on the wire, read from the kernel rather than from the ranks.

Runs in the zygote, inside the sandbox's own network namespace, where the only
traffic is the ranks' gloo and store connections over loopback. Each rank runs
as its own uid, so the kernel's per-socket counters (``sock_diag``, the netlink
interface ``ss`` uses) attribute every TCP byte to the rank that sent it and
the rank that received it. Student code cannot lie to these counters; it can
only close a socket to make its counters disappear, which the loopback device
total (``/proc/net/dev``) catches. Stdlib only: mounted into the sandbox.
"""

from __future__ import annotations

import socket
import struct

NETLINK_SOCK_DIAG = 4
SOCK_DIAG_BY_FAMILY = 20
NLM_F_REQUEST, NLM_F_DUMP = 0x1, 0x300
NLMSG_ERROR, NLMSG_DONE = 2, 3
INET_DIAG_INFO = 2
NLMSG = struct.Struct("=IHHII")
REQ = struct.Struct("=BBBxI HH 16s16s I 8s")
MSG = struct.Struct("=BBBB HH 16s16s I 8s IIIII")
RTA = struct.Struct("=HH")
# Offsets into struct tcp_info (linux/tcp.h); bytes_sent and bytes_retrans need Linux >= 4.19.
TCPI_BYTES_ACKED, TCPI_BYTES_SENT, TCPI_BYTES_RETRANS = 120, 200, 208

Conn = tuple[int, int]  # (local port, remote port)


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
            data = sock.recv(1 << 16)
            offset = 0
            while offset + NLMSG.size <= len(data):
                length, kind, _, _, _ = NLMSG.unpack_from(data, offset)
                if kind == NLMSG_DONE:
                    return out
                if kind == NLMSG_ERROR:
                    raise OSError("sock_diag request failed")
                body = data[offset + NLMSG.size : offset + length]
                out.append(_parse(body))
                offset += (length + 3) & ~3
    finally:
        sock.close()


def _parse(body: bytes) -> dict[str, int]:
    fields = MSG.unpack_from(body)
    sport, dport = socket.ntohs(fields[4]), socket.ntohs(fields[5])
    uid = fields[13]
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
    return {"sport": sport, "dport": dport, "uid": uid, "sent": sent}


def snapshot() -> dict[Conn, tuple[int, int]]:
    """Per connection (local port, remote port): (owner uid, bytes sent so far)."""
    return {(s["sport"], s["dport"]): (s["uid"], s["sent"]) for s in tcp_sockets() if s["dport"]}


def traffic(before: dict[Conn, tuple[int, int]], after: dict[Conn, tuple[int, int]]) -> dict[int, dict[int, int]]:
    """Bytes each uid sent to each peer uid between two snapshots."""
    owner = {conn: uid for conn, (uid, _) in after.items()}
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
