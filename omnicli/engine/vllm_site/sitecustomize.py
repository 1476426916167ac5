"""Run at the start of the Python processes vLLM starts for omni (this folder is first on their
PYTHONPATH): the packages omni hid stay hidden there (engine/torch_extras.py); then the
sitecustomize this one stands in front of, if the environment has one."""

import importlib.machinery
import importlib.util
import os
import sys

for _name in filter(None, os.environ.get("OMNI_HIDDEN_MODULES", "").split(",")):
    sys.modules[_name] = None  # type: ignore[assignment]

_here = os.path.dirname(os.path.abspath(__file__))
_spec = importlib.machinery.PathFinder.find_spec(
    "sitecustomize", [path for path in sys.path if os.path.abspath(path or ".") != _here])
if _spec is not None and _spec.loader is not None:
    _module = importlib.util.module_from_spec(_spec)
    _spec.loader.exec_module(_module)
