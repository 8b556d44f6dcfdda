__version__ = "0.1.0"

# public: -W error::pytest_llm_latency.LatencyWarning; old names warn with LatencyDeprecationWarning
from .core.errors import LatencyDeprecationWarning, LatencyWarning  # noqa: E402

__all__ = ["LatencyDeprecationWarning", "LatencyWarning", "__version__"]
