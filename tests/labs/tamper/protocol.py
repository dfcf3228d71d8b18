"""Forges one message to the zygote on the rank's own control socket, in the middle of its first call.

The test puts three names before this file: MESSAGE (which message), REACH (how the socket is found:
"fd" scans the descriptors the rank inherited, "frames" walks the stack up to the harness, "gc" looks
for the harness's objects among the garbage collector's) and TARGET (the function to wrap; None in a
script, where this runs while the script runs). Every forged message must end the rank with a problem.
"""

import gc
import io
import json
import os
import socket
import stat
import struct
import sys
import time

import torch

SETTINGS = globals()
CALLS = [0]


def _frame(meta, payload=b""):
    head = json.dumps(meta).encode()
    return struct.pack(">II", len(head), len(payload)) + head + payload


def _control_fd():
    """The one unix socket a CPU rank holds: its end of the socketpair to the zygote."""
    for fd in range(3, 128):
        try:
            if not stat.S_ISSOCK(os.fstat(fd).st_mode):
                continue
            probe = socket.socket(fileno=os.dup(fd))
        except OSError:
            continue
        with probe:
            if probe.family == socket.AF_UNIX:
                return fd
    raise RuntimeError("no control socket found")


def _harness():
    """(send(meta, payload), the call being run), reached as REACH says."""
    if SETTINGS["REACH"] == "frames":
        frame = sys._getframe()
        while frame is not None:
            me = frame.f_locals.get("me")
            if me is not None and hasattr(me, "ctl"):
                return me.send, frame.f_locals.get("i", 0)
            frame = frame.f_back
    elif SETTINGS["REACH"] == "gc":
        for obj in gc.get_objects():
            if type(obj).__name__ == "Rank" and hasattr(obj, "ctl"):
                return obj.send, 0
    else:
        fd = _control_fd()

        def send(meta, payload=b""):
            data = memoryview(_frame(meta, payload))
            while data:
                data = data[os.write(fd, data) :]

        return send, 0
    raise RuntimeError("the harness was not found")


def _saved(value):
    buffer = io.BytesIO()
    torch.save(value if isinstance(value, torch.Tensor) else torch.zeros(1), buffer)
    return buffer.getvalue()


def _forge(value=None):
    send, i = _harness()
    payload = _saved(value)
    rank = int(os.environ.get("RANK", "0"))
    message = {
        "result_for_another_call": ({"kind": "result", "call": i + 1}, payload),
        "second_result": ({"kind": "result", "call": i}, payload),
        "want_out_of_turn": ({"kind": "want", "call": i + 1}, b""),
        "done_mid_call": ({"kind": "done", "guard": {}}, b""),
        "fault_after_ready": ({"kind": "fault", "traceback": "RuntimeError: the grader failed"}, b""),
        "forged_wire": ({"kind": "wire", "call": i, "sent": {"0": {"1": 1}}, "loopback_bytes": 1}, b""),
        "result_as_another_rank": ({"kind": "result", "call": i, "rank": rank + 1, "group": 0}, payload),
    }[SETTINGS["MESSAGE"]]
    send(*message)
    if SETTINGS["MESSAGE"] not in ("second_result", "result_as_another_rank"):
        time.sleep(2)  # refused on its own: the zygote ends this rank
    # Else the forged result answers the call, and the harness's own result follows as a second one.


def _wrapped(fn):
    def wrapper(*args, **kwargs):
        out = fn(*args, **kwargs)
        CALLS[0] += 1
        if CALLS[0] == 1:
            _forge(out if out is not None else (args[0] if args else None))
        return out

    return wrapper


if SETTINGS["TARGET"]:
    SETTINGS[SETTINGS["TARGET"]] = _wrapped(SETTINGS[SETTINGS["TARGET"]])
else:
    _forge()
