"""Where the content and the data live: read as ``app.config.Settings`` reads them, without loading its machinery.

`ringlab content check`, which an author runs after every edit, needs these two settings and nothing else,
and the settings library costs more to import than the check takes to run. The precedence is the
settings class's own: an environment variable (``RINGLAB_DATA_DIR``, any case), then the ``.env`` file of
the working directory, then the default; a test holds the two to the same answers.
"""

from __future__ import annotations

import os
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[1]
ENV_PREFIX = "RINGLAB_"
ENV_FILE = ".env"
DEFAULTS = {"data_dir": REPO_ROOT / "data", "content_dir": REPO_ROOT / "content"}


def setting_path(name: str) -> Path:
    """The ``data_dir`` or ``content_dir`` setting."""
    key = f"{ENV_PREFIX}{name}".lower()
    found = next((v for k, v in os.environ.items() if k.lower() == key), None)
    if found is None and os.path.isfile(ENV_FILE):
        from dotenv import dotenv_values

        found = next((v for k, v in dotenv_values(ENV_FILE).items() if k.lower() == key and v is not None), None)
    return Path(found) if found is not None else DEFAULTS[name]
