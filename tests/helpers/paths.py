"""Where the tests find the repository's files, wherever a test module sits in the tree."""
from __future__ import annotations

from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
#: real wire recordings (copies of ../shared/recordings) the unit tests replay
RECORDINGS = ROOT / "tests" / "unit" / "recordings"
#: the model configs shipped with the package
CONFIGS = ROOT / "pytest_llm_latency" / "roofline" / "configs"
