"""The static pre-check: code that reaches into the grader is refused by line before anything runs;
every lab's reference, mutants and starter, and ordinary torch code, pass it."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import pytest

from labs.spec import LabError, load_lab, load_labs, mutants, parse_spec, precheck

from .conftest import labs_dir, solution

PUBLIC = ["driver.py", "task.py"]

# (rule, code, line of the first finding, what the message quotes)
REFUSED = [
    ("frames", "import sys\n\n\ndef f():\n    return sys._getframe(1)\n", 5, "sys._getframe"),
    ("frames", "import inspect\nframe = inspect.currentframe()\n", 2, "inspect.currentframe"),
    ("frames", "from inspect import stack as s\n", 1, "from inspect import stack"),
    ("frames", "x = 1\n\n\ndef up(frame):\n    return frame.f_back\n", 5, "frame.f_back"),
    ("frames", "def f(tb):\n    return tb.tb_frame.f_globals\n", 2, "tb.tb_frame"),
    ("frames", "def f(frame):\n    return getattr(frame, 'f_locals')\n", 2, "'f_locals'"),
    ("frames", "import sys as s\ngrab = getattr(s, '_getframe')\n", 2, "sys._getframe"),
    ("frames", "def f(gen):\n    return gen.gi_frame\n", 2, "gen.gi_frame"),
    ("gc", "import gc\n\nfor o in gc.get_objects():\n    pass\n", 3, "gc.get_objects"),
    ("gc", "from gc import get_referrers as refs\n", 1, "from gc import get_referrers"),
    ("gc", "import gc\nkids = gc.get_referents(object())\n", 2, "gc.get_referents"),
    ("import-system", "import sys\nsys.modules['driver'] = object()\n", 2, "sys.modules['driver'] = ..."),
    ("import-system", "import sys\ndel sys.modules['torch']\n", 2, "del sys.modules['torch']"),
    ("import-system", "import sys\nsys.modules.update({'driver': 1})\n", 2, "sys.modules.update(...)"),
    ("import-system", "import sys\nsys.modules.pop('driver')\n", 2, "sys.modules.pop(...)"),
    ("import-system", "import sys\nsys.modules.setdefault('x', 1)\n", 2, "sys.modules.setdefault(...)"),
    ("import-system", "import sys\nsys.meta_path.insert(0, object())\n", 2, "sys.meta_path.insert(...)"),
    ("import-system", "import sys\nm = sys.modules\nm['driver'] = 1\n", 3, "m['driver'] = ..."),
    ("import-system", "from sys import modules\nmodules['driver'] = 1\n", 2, "modules['driver'] = ..."),
    ("tracing", "import sys\nsys.settrace(print)\n", 2, "sys.settrace"),
    ("tracing", "import sys\nsys.setprofile(print)\n", 2, "sys.setprofile"),
    ("tracing", "import sys\nsys.addaudithook(print)\n", 2, "sys.addaudithook"),
    ("tracing", "import threading\nthreading.settrace(print)\n", 2, "threading.settrace"),
    ("public-modules", "import driver\n\ndriver.train = print\n", 3, "driver.train = ..."),
    ("public-modules", "import driver\nsetattr(driver, 'train', print)\n", 2, "setattr(driver, ...)"),
    ("public-modules", "import driver as d\nd.CONFIG['lr'] = 0\n", 2, "d.CONFIG['lr'] = ..."),
    ("public-modules", "from driver import Model\nModel.forward = print\n", 2, "Model.forward = ..."),
    ("public-modules", "import sys\nsys.modules['driver'].train = print\n", 2, "sys.modules['driver'].train = ..."),
    ("public-modules", "import task\ntask.batch = print\n", 2, "task.batch = ..."),
    ("public-modules", "import driver\ndel driver.train\n", 2, "del driver.train"),
    ("public-modules", "import driver\ndriver.__dict__.update(train=print)\n", 2, "driver.__dict__.update(...)"),
    ("public-modules", "import driver\nvars(driver)['train'] = print\n", 2, "vars(driver)['train'] = ..."),
    ("public-modules", "import importlib\nd = importlib.import_module('driver')\nd.train = 1\n", 3, "d.train = ..."),
    ("public-modules", "import driver\nobject.__setattr__(driver, 'x', 1)\n", 2, "object.__setattr__(driver, ...)"),
    ("engine", "from labs import harness\n", 1, "from labs import ..."),
    ("engine", "import labs.rank.trees\n", 1, "import labs.rank.trees"),
    ("engine", "import __main__\n", 1, "import __main__"),
    ("engine", "h = __import__('labs.rank.harness')\n", 1, "__import__('labs.rank.harness')"),
    ("engine", "import sys\nh = sys.modules['labs.rank.harness']\n", 2, "sys.modules['labs.rank.harness']"),
    ("native", "import ctypes\n", 1, "import ctypes"),
    ("native", "from ctypes import CDLL\n", 1, "from ctypes import ..."),
    ("native", "import cffi\n", 1, "import cffi"),
    ("native", "import importlib\nc = importlib.import_module('_ctypes')\n", 2, "importlib.import_module('_ctypes')"),
    ("native", "f = open('/proc/self/mem', 'rb')\n", 1, "'/proc/self/mem'"),
    ("native", "import os\nf = open(f'/proc/{os.getppid()}/mem', 'rb')\n", 2, "/mem"),
    ("builtins", "import builtins\nbuiltins.print = len\n", 2, "builtins.print = ..."),
    ("builtins", "import builtins\nsetattr(builtins, 'open', len)\n", 2, "setattr(builtins, ...)"),
    ("builtins", "__builtins__['open'] = len\n", 1, "__builtins__"),
    ("builtins", "import builtins\nbuiltins.__dict__['len'] = print\n", 2, "builtins.__dict__['len'] = ..."),
    ("introspection", "kinds = ().__class__.__base__.__subclasses__()\n", 1, "__subclasses__"),
    ("introspection", "def f(g):\n    return g.__globals__['x']\n", 2, "g.__globals__"),
    ("introspection", "def f(g):\n    return g.__code__\n", 2, "g.__code__"),
    ("introspection", "def f(g):\n    return g.__closure__[0].cell_contents\n", 2, "g.__closure__"),
    ("introspection", "import inspect\nv = inspect.getclosurevars(print)\n", 2, "inspect.getclosurevars"),
    ("dynamic-code", "exec('import ct' + 'ypes')\n", 1, "exec"),
    ("dynamic-code", "x = eval('1 + 1')\n", 1, "eval"),
    ("dynamic-code", "code = compile('1', 'x', 'eval')\n", 1, "compile"),
    ("dynamic-code", "name = 'ct' + 'ypes'\nm = __import__(name)\n", 2, "__import__(<a computed name>)"),
    ("dynamic-code", "import importlib\nload = importlib.import_module\nm = load('x' + 'y')\n", 3, "computed name"),
    ("dynamic-code", "import runpy\nrunpy.run_path('other.py')\n", 2, "runpy.run_path"),
]


@pytest.mark.parametrize(("rule", "code", "line", "what"), REFUSED, ids=[f"{r[0]}-{i}" for i, r in enumerate(REFUSED)])
def test_code_that_reaches_into_the_grader_is_refused_by_line(rule: str, code: str, line: int, what: str) -> None:
    found = precheck.check(code, public_files=PUBLIC)
    assert found, "nothing refused"
    first = found[0]
    assert (first.rule, first.line) == (rule, line), found
    assert what in first.what, first
    message = precheck.refusal(code, public_files=PUBLIC)
    assert message is not None
    assert message.startswith(f"Not allowed, so nothing was run: line {line}: ")
    assert RULES_FIX[rule] in message  # says what to do instead


RULES_FIX = {name: rule.fix for name, rule in precheck.RULES.items()}


def test_every_rule_has_a_refusal_case() -> None:
    assert {r[0] for r in REFUSED} == set(precheck.RULES)


def test_allow_lifts_only_the_named_rules() -> None:
    code = "import gc, sys\n\nobjs = gc.get_objects()\nframe = sys._getframe()\n"
    assert [f.rule for f in precheck.check(code)] == ["gc", "frames"]
    assert [f.rule for f in precheck.check(code, allow=["gc"])] == ["frames"]
    assert precheck.check(code, allow=["gc", "frames"]) == []


def test_public_modules_are_the_labs_own() -> None:
    code = "import driver, task\ndriver.x = 1\ntask.y = 2\n"
    assert [f.line for f in precheck.check(code, public_files=["driver.py"])] == [2]
    assert [f.line for f in precheck.check(code, public_files=["task.py"])] == [3]


def test_message_lists_every_place() -> None:
    code = "import ctypes\nimport gc\n\nx = gc.get_objects()\nimport driver\ndriver.f = 1\n"
    message = precheck.refusal(code, public_files=PUBLIC)
    assert message is not None
    assert message.startswith("Not allowed, so nothing was run: line 1: import ctypes loads native code")
    assert "Also not allowed: line 4 (gc.get_objects), line 6 (driver.f = ...)." in message


HONEST = {
    "script-environment": (
        "import os\nimport sys\n\n\ndef main() -> None:\n"
        "    missing = [v for v in ('RANK', 'WORLD_SIZE') if not os.environ.get(v)]\n"
        "    if missing:\n        print('missing', missing, file=sys.stderr)\n        sys.exit(2)\n"
        "    os.environ.setdefault('SEED', '0')\n    os._exit(0)\n\n\n"
        "if __name__ == '__main__':\n    main()\n"
    ),
    "reads-sys-modules": "import sys\n\nPRELOADED = 'torch._dynamo' in sys.modules\nargv = sys.argv[1:]\n",
    "torch-hooks": (
        "import torch\n\n\ndef watch(model: torch.nn.Module) -> list:\n"
        "    handles = [model.register_forward_hook(lambda m, i, o: None)]\n"
        "    for p in model.parameters():\n        handles.append(p.register_hook(lambda g: g / 2))\n"
        "        p.register_post_accumulate_grad_hook(lambda p: None)\n"
        "    with torch.autograd.graph.saved_tensors_hooks(lambda t: t, lambda t: t):\n        pass\n"
        "    return handles\n"
    ),
    "getattr-on-torch": (
        "import torch\nimport torch.distributed as dist\n\n"
        "dtype = getattr(torch, 'bfloat16')\nreduce = getattr(dist, 'all_reduce')\n"
        "has = hasattr(dist, 'reduce_scatter_tensor')\n\n\n"
        "def replace(module, name, values):\n    setattr(module, name, torch.nn.Parameter(values))\n"
    ),
    "own-compile-and-torch-compile": (
        "import re\nimport torch\n\nPATTERN = re.compile(r'step-(\\d+)')\n\n\n"
        "def compile(model):\n    return torch.compile(model)\n\n\nfast = compile(torch.nn.Linear(2, 2))\n"
    ),
    "uses-the-driver": (
        "import driver\nfrom driver import build_model\nimport task\n\n\n"
        "def step(seed):\n    model = build_model(seed)\n    out = driver.train(model, task.batch(seed, 0, 0, 1))\n"
        "    out['extra'] = 1  # its own result, not the driver's\n    return out\n"
    ),
    "errors-and-introspection": (
        "import inspect\nimport sys\nimport traceback\n\n\n"
        "def safe(fn):\n    params = inspect.signature(fn).parameters\n    try:\n        return fn()\n"
        "    except Exception:\n        traceback.print_exc()\n        kind, value, tb = sys.exc_info()\n"
        "        return kind.__name__, len(params)\n"
    ),
    "own-setattr-and-dicts": (
        "import importlib\n\n\nclass Config:\n    def __setattr__(self, key, value):\n"
        "        super().__setattr__(key, value)\n\n\ncfg = Config()\ncfg.lr = 0.1\nstate = {}\n"
        "state.update(step=1)\nstate.pop('step')\ndist = importlib.import_module('torch.distributed')\n"
    ),
}


@pytest.mark.parametrize("name", sorted(HONEST))
def test_ordinary_code_passes(name: str) -> None:
    assert precheck.check(HONEST[name], public_files=PUBLIC) == []


def lab_code() -> list[Any]:
    """Each lab's reference, starter and mutants (the solution with each diff applied), as code."""
    return [
        pytest.param(lab.id, code, id=f"{lab.id}/{name}")
        for lab in load_labs(labs_dir()).values()
        for name, code in [
            ("solution.py", lab.solution_path.read_text()),
            ("starter.py", lab.starter),
            *((m.label, m.code) for m in mutants.load(lab)),
        ]
    ]


@pytest.mark.parametrize(("lab_id", "code"), lab_code())
def test_every_reference_mutant_and_starter_passes(lab_id: str, code: str) -> None:
    spec = load_lab(labs_dir() / lab_id).spec
    found = precheck.check(code, public_files=spec.public_files, allow=spec.precheck.allow)
    assert found == [], [str(f) for f in found]


def test_code_that_does_not_parse_is_left_to_the_syntax_check() -> None:
    assert precheck.check("def f(:\n") == []


YAML = (
    "id: a-lab\ntitle: A\nexercise: ex-1\nworld_sizes: [2]\nbackends: [gloo]\ntime_limit_s: 5\n"
    "memory_limit_mb: 256\nfunctions: [f]\nchecks:\n  - id: a\n    title: A\n    points: 1\n"
)


def test_lab_yaml_lifts_rules_by_name_and_names_a_misspelt_one() -> None:
    assert parse_spec(YAML + "precheck:\n  allow: [gc, frames]\n", "lab.yaml").precheck.allow == ["gc", "frames"]
    with pytest.raises(LabError) as exc:
        parse_spec(YAML + "precheck:\n  allow:\n    - gc\n    - frame\n", "lab.yaml")
    assert str(exc.value).startswith("lab.yaml:16: precheck.allow.1: Value error, unknown pre-check rule 'frame';")
    assert "the rules are frames, gc," in str(exc.value)


def test_a_lab_without_precheck_dumps_as_before() -> None:
    # The dump is what a stored lab version's digest covers: no new key unless a lab sets one.
    assert "precheck" not in parse_spec(YAML, "lab.yaml").model_dump(mode="json")
    lifted = parse_spec(YAML + "precheck: {allow: [gc]}\n", "lab.yaml")
    assert lifted.model_dump(mode="json")["precheck"] == {"allow": ["gc"]}


# Graded through the real grader and sandbox.
RING = "ring-allreduce"
WALKS_THE_HEAP = 'import gc\n\nprint("RAN", len(gc.get_objects()) > 0)\n'


def test_refused_submission_is_not_run(one_grader) -> None:
    jobs = one_grader.jobs
    v = one_grader.grade(RING, WALKS_THE_HEAP + solution(RING), world_sizes=[2])
    assert v.status == "not_allowed"
    assert v.message.startswith("Not allowed, so nothing was run: line 3: gc.get_objects walks the garbage")
    assert v.score == 0 and all(c.message == "not run" for c in v.checks)
    assert one_grader.jobs == jobs  # no job went to a sandbox
    assert v.output == {} and v.data == {}


def test_a_lab_that_lifts_the_rule_runs_the_same_code(one_grader, tmp_path: Path) -> None:
    folder = tmp_path / RING
    shutil.copytree(labs_dir() / RING, folder)
    with (folder / "lab.yaml").open("a") as f:
        f.write("precheck:\n  allow: [gc]\n")
    v = one_grader.grade(RING, WALKS_THE_HEAP + solution(RING), world_sizes=[2], lab_dir=folder)
    assert v.status == "passed", v.message
    assert all("RAN True" in text for text in v.output.values()) and len(v.output) == 2


def test_star_imports_are_followed_but_the_codes_own_names_are_its_own() -> None:
    assert [f.line for f in precheck.check("from inspect import *\n\nframes = stack()\n")] == [3]
    own = (
        "from driver import *\n\n\ndef step(model):\n    model.weight = None\n    out = train(model)\n    return out\n"
    )
    assert precheck.check(own, public_files=PUBLIC) == []
    assert [f.line for f in precheck.check("from driver import *\ntrain.calls = 0\n", public_files=PUBLIC)] == [2]


def test_code_nested_too_deeply_to_check_is_refused_with_a_reason() -> None:
    code = "x = y" + ".a" * 2000 + "\n"
    compile(code, "submission.py", "exec")  # Python itself accepts it
    message = precheck.refusal(code)
    assert message is not None and "line 1: the file nests expressions too deeply to be checked" in message
