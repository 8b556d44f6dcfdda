import sys
from pathlib import Path

# pytester's in-process runs unload modules first imported inside them; numpy
# cannot be loaded twice per process, so import the lazily-imported deps here.
import httpx  # noqa: F401
import numpy  # noqa: F401
import yaml  # noqa: F401

sys.path.insert(0, str(Path(__file__).parent))  # tests/fakeserver.py

pytest_plugins = ["pytester"]
