"""Faults the trusted side injects into a group of ranks from outside: a crash when a checkpoint appears.

Stdlib only: it runs in the zygote, inside the sandbox. A phase of a lab may carry a fault plan
(``judge.Phase.fault``); the worker sends it to the zygote only after the group's ranks were
forked, so no rank ever holds it, and the zygote acts on what it sees from outside the ranks:

    {"dir": "ws2-step/checkpoints",      # a folder of the phases' shared directory, made here (0777)
     "pattern": "^step-(\\d+)\\.pt$",     # the names of complete checkpoints; group 1 is the step
     "kill": {"at": 6, "rank": 1}}        # or {"at": 6, "writer": True, "cut": True}, or None

The zygote watches the folder with inotify from before the ranks are released until the group
ends, and records every checkpoint *published* there: a name that matches ``pattern`` appearing,
created under that name or renamed to it. With ``kill``, the first checkpoint published for a step
at or past ``at`` ends a rank (every process of its uid, SIGKILL), as a machine that fails:
``rank``, or with ``writer`` the rank whose uid owns the checkpoint's file. ``cut`` then makes the
failure strike while that checkpoint's bytes were being written: once every process of the group
is gone, the file the bytes were written to is put back under the name it was created with (a
rename to the checkpoint's name is undone), cut to half its size, and every file created in the
folder after it is removed; a file that existed before keeps what was written to it. So a script
that writes a checkpoint straight to its final name leaves half a file under that name, and one
that writes a temporary file and renames it when complete leaves half a temporary file (or, for a
file written outside the folder and renamed into it, no checkpoint of that step at all).

At the end of the group, every file and folder its ranks left under the plan's top folder
(``ws2-step`` above) is made readable and writable by all: on a real machine every launch of a job
runs as one user, while here each group's ranks have uids of their own, so a checkpoint written
with ``tempfile.mkstemp`` (mode 0600) would be unreadable to the relaunch.

A crash that lands late (on a loaded machine the zygote may wait for a CPU while the ranks train on)
is marked ``late``: the grader then runs the job again (``labs.host.grader.FAULT_ATTEMPTS``), and the
ranks of a group with a fault plan run at a lower priority than the zygote, so that it rarely comes to that.

``Injector.close()`` returns the report the worker files as ``GroupRun.fault_report``:

    {"present": [names in the folder when the watch began],
     "published": [[name, step], ...],   # in order, every publication seen during the group
     "fault": None or {"rank", "at", "name", "step", "cut": None or {"file", "bytes", "kept"},
                       "undone": [[from, to]], "removed": [names], "completed": bool,
                       "late": bool},   # it landed after a later checkpoint was out, or its rank had ended

     "error": None or why the folder could not be watched, or the fault not completed}
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import re
import signal
import stat
import struct
import time
from collections.abc import Iterator
from typing import Any

IN_MOVED_FROM, IN_MOVED_TO, IN_CREATE, IN_DELETE = 0x40, 0x80, 0x100, 0x200
IN_Q_OVERFLOW, IN_ISDIR = 0x4000, 0x40000000
MASK = IN_MOVED_FROM | IN_MOVED_TO | IN_CREATE | IN_DELETE
EVENT = struct.Struct("iIII")  # wd, mask, cookie, length of the name that follows
GONE_S = 2.0  # how long a killed group's processes may take to disappear before a cut is made anyway


class Inotify:
    """A non-blocking inotify instance watching one folder (libc through ctypes)."""

    def __init__(self, folder: str):
        libc = ctypes.CDLL(None, use_errno=True)
        self.fd = libc.inotify_init1(os.O_NONBLOCK | os.O_CLOEXEC)
        if self.fd < 0:
            raise OSError(ctypes.get_errno(), "inotify_init1 failed")
        if libc.inotify_add_watch(self.fd, os.fsencode(folder), MASK) < 0:
            err = ctypes.get_errno()
            os.close(self.fd)
            raise OSError(err, f"inotify_add_watch failed on {folder}")

    def read(self) -> list[tuple[int, int, str]]:
        """The events waiting: (mask, cookie, name), in the order the kernel queued them."""
        out: list[tuple[int, int, str]] = []
        while True:
            try:
                data = os.read(self.fd, 1 << 16)
            except BlockingIOError:
                return out
            if not data:
                return out
            offset = 0
            while offset + EVENT.size <= len(data):
                _, mask, cookie, length = EVENT.unpack_from(data, offset)
                raw = data[offset + EVENT.size : offset + EVENT.size + length]
                out.append((mask, cookie, os.fsdecode(raw.rstrip(b"\0"))))
                offset += EVENT.size + length

    def close(self) -> None:
        with contextlib.suppress(OSError):
            os.close(self.fd)


class Injector:
    """One group's fault plan: watches the folder, says which ranks to end, completes the fault at the end."""

    def __init__(self, plan: dict[str, Any], shared_dir: str, uids: list[int]):
        self.kill: dict[str, Any] | None = plan.get("kill")
        self.top = os.path.join(shared_dir, str(plan["dir"]).split("/")[0])
        self.pattern = re.compile(str(plan["pattern"]))
        self.folder = os.path.join(shared_dir, str(plan["dir"]))
        self.uids = uids
        self.error: str | None = None
        self.present: list[str] = []
        self.published: list[list[Any]] = []
        self.seq = 0
        # current name -> (the name its bytes were created under, when: a sequence number; None: before the watch)
        self.origin: dict[str, tuple[str, int | None]] = {}
        self.moving: dict[int, tuple[str, int | None]] = {}
        self.fired: dict[str, Any] | None = None
        self.where: tuple[tuple[str, int | None], int] = (("", None), 0)
        self.inotify: Inotify | None = None
        try:
            make_folder(shared_dir, str(plan["dir"]))
            self.inotify = Inotify(self.folder)
            self.present = sorted(os.listdir(self.folder))
        except (OSError, ValueError) as exc:
            self.error = f"the folder {plan['dir']} could not be watched: {exc}"
        self.origin = {name: (name, None) for name in self.present}

    def fileno(self) -> int | None:
        return self.inotify.fd if self.inotify is not None else None

    def poll(self) -> list[int]:
        """Take the events waiting; the ranks to end now (once, when the plan's checkpoint is published)."""
        if self.inotify is None:
            return []
        before = self.fired
        for mask, cookie, name in self.inotify.read():
            self.take(mask, cookie, name)
            if before is None and self.fired is not None and self.published[-1][1] > self.fired["step"]:
                # A later checkpoint was already out when the plan's was seen: the ranks trained on past the
                # crash (a loaded machine kept the zygote waiting), so this run does not test a crash there.
                self.fired["late"] = True
        if self.fired is not None and before is None:
            return [int(self.fired["rank"])]
        return []

    def too_late(self) -> None:
        """The crash landed after its rank had ended: the run did not test it (see ``poll``)."""
        if self.fired is not None:
            self.fired["late"] = True

    def take(self, mask: int, cookie: int, name: str) -> None:
        if mask & IN_Q_OVERFLOW:
            self.error = "more file events than the kernel queues: the grader lost track of the files written"
            return
        if mask & IN_ISDIR or not name:
            return
        self.seq += 1
        if mask & IN_CREATE:
            self.origin[name] = (name, self.seq)
            self.publish(name)
        elif mask & IN_MOVED_FROM:
            self.moving[cookie] = self.origin.pop(name, (name, None))
        elif mask & IN_MOVED_TO:
            self.origin[name] = self.moving.pop(cookie, (name, None))
            self.publish(name)
        elif mask & IN_DELETE:
            self.origin.pop(name, None)

    def publish(self, name: str) -> None:
        found = self.pattern.match(name)
        if not found:
            return
        step = int(found.group(1))
        self.published.append([name, step])
        kill = self.kill
        if kill is None or self.fired is not None or step < int(kill["at"]):
            return
        rank = int(kill.get("rank", 0))
        if kill.get("writer"):
            with contextlib.suppress(OSError, ValueError):
                owner = os.lstat(os.path.join(self.folder, name)).st_uid
                rank = self.uids.index(owner) if self.uids.count(owner) == 1 else rank
        self.fired = {"rank": rank, "at": int(kill["at"]), "name": name, "step": step}
        self.where = (self.origin[name], self.seq)  # the bytes' first name and creation; when they were published

    def close(self, living: Any = None) -> dict[str, Any]:
        """The report; with a cut planned, first wait until ``living()`` (the group's processes) is empty."""
        fault: dict[str, Any] | None = None
        if self.inotify is not None:
            if self.poll():  # seen only now, once every rank had ended: too late to crash anything
                self.too_late()
            if self.fired is not None and self.kill and self.kill.get("cut"):
                deadline = time.monotonic() + GONE_S
                while living is not None and living() and time.monotonic() < deadline:
                    time.sleep(0.01)
                self.poll()  # everything the killed processes did before they were gone
            self.inotify.close()
        if self.fired is not None:
            fault = {"late": False, **self.fired, "cut": None, "undone": [], "removed": [], "completed": False}
            if self.kill and self.kill.get("cut") and self.error is None:
                try:
                    self.cut(*self.where, fault)
                except OSError as exc:
                    self.error = f"the checkpoint being written could not be cut: {exc}"
        share(self.top, set(self.uids))
        return {"present": self.present, "published": self.published, "fault": fault, "error": self.error}

    def cut(self, origin: tuple[str, int | None], seq: int, fault: dict[str, Any]) -> None:
        """Leave the folder as a failure while ``origin``'s bytes were written would have left it.

        ``seq``: when the checkpoint was published. Bytes renamed into the folder from elsewhere (their origin
        unknown here) were written outside it: the failure came before that rename, so the name is removed.
        Sets ``fault["completed"]`` when the folder is left as the failure would have left it.
        """
        created, when = origin
        later = sorted(n for n, (_, s) in self.origin.items() if s is not None and s > (seq if when is None else when))
        for gone in later:
            os.unlink(os.path.join(self.folder, gone))
        fault["removed"] = later
        now = next((n for n, o in self.origin.items() if o == origin), None)
        if when is None:
            if now is not None and now not in self.present:
                os.unlink(os.path.join(self.folder, now))
                fault["removed"] = sorted([*later, now])
            fault["completed"] = now is not None and now not in self.present
            return
        if now is None:  # the script deleted the file itself: nothing of it is left to cut
            fault["completed"] = True
            return
        if now != created:
            os.rename(os.path.join(self.folder, now), os.path.join(self.folder, created))
            fault["undone"] = [[now, created]]
        fault["cut"] = truncate_half(os.path.join(self.folder, created), set(self.uids))
        fault["cut"]["file"] = created
        fault["completed"] = True


def make_folder(root: str, relative: str) -> None:
    """``root/relative``, every level this makes writable by every rank (0777, whatever the umask)."""
    path = root
    for part in relative.split("/"):
        if part in ("", ".", ".."):
            raise ValueError(f"not a plain relative folder: {relative!r}")
        path = os.path.join(path, part)
        try:
            os.mkdir(path)
        except FileExistsError:
            continue
        os.chmod(path, 0o777)


def truncate_half(path: str, uids: set[int]) -> dict[str, int]:
    """Cut the regular file at ``path`` (never a link) to half its size; as its owner if that is a rank's uid."""
    info = os.lstat(path)
    if not stat.S_ISREG(info.st_mode):
        raise OSError(f"{os.path.basename(path)} is not a regular file")
    try:
        fd = os.open(path, os.O_WRONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except PermissionError:
        if info.st_uid not in uids:
            raise
        with as_user(info.st_uid):  # its owner may make it writable first
            with contextlib.suppress(OSError):
                os.chmod(path, stat.S_IMODE(info.st_mode) | stat.S_IWUSR)
            fd = os.open(path, os.O_WRONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    try:
        size = os.fstat(fd).st_size
        os.ftruncate(fd, size // 2)
    finally:
        os.close(fd)
    return {"bytes": size, "kept": size // 2}


@contextlib.contextmanager
def as_user(uid: int) -> Iterator[None]:
    """Act as ``uid`` for a moment (the zygote keeps CAP_SETUID and CAP_SETGID, not CAP_DAC_OVERRIDE)."""
    egid, euid = os.getegid(), os.geteuid()
    if uid == euid:
        yield
        return
    os.setegid(uid)
    os.seteuid(uid)
    try:
        yield
    finally:
        os.seteuid(euid)
        os.setegid(egid)


def share(top: str, uids: set[int]) -> None:
    """Make what ``uids`` left under ``top`` readable and writable by every uid (never following a link)."""
    for folder, dirs, files in os.walk(top, followlinks=False):
        for name, bits in [(d, 0o777) for d in dirs] + [(f, 0o666) for f in files]:
            path = os.path.join(folder, name)
            with contextlib.suppress(OSError):
                info = os.lstat(path)
                if info.st_uid not in uids or stat.S_ISLNK(info.st_mode):
                    continue
                if stat.S_IMODE(info.st_mode) & bits != bits:
                    with as_user(info.st_uid):
                        os.chmod(path, stat.S_IMODE(info.st_mode) | bits)


def processes(uids: set[int]) -> dict[int, int]:
    """The processes in this pid namespace whose real uid is one of ``uids`` and that have not exited (a zombie
    holds no file open), with that uid."""
    found = {}
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/status") as f:
                fields = dict(line.split(":", 1) for line in f if ":" in line)
            if fields.get("State", "").strip().startswith(("Z", "X")):
                continue
            uid = int(fields["Uid"].split()[0])
        except (OSError, KeyError, ValueError, IndexError):
            continue
        if uid in uids:
            found[int(name)] = uid
    return found


def kill(targets: dict[int, int]) -> None:
    """SIGKILL each pid, as its uid: the zygote keeps no CAP_KILL, and a signal to another uid's process needs
    the sender's effective uid to be the target's (CAP_SETUID lets it take that uid for the call)."""
    euid = os.geteuid()
    for uid in sorted(set(targets.values())):
        switch = uid != euid
        if switch:
            os.seteuid(uid)
        try:
            for pid, owner in targets.items():
                if owner == uid:
                    with contextlib.suppress(OSError):
                        os.kill(pid, signal.SIGKILL)
        finally:
            if switch:
                os.seteuid(euid)
