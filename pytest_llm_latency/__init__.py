__version__ = "0.1.0"

from .core.errors import LatencyDeprecationWarning, LatencyWarning  # noqa: E402  (public: -W error::pytest_llm_latency.LatencyWarning)

__all__ = ["LatencyDeprecationWarning", "LatencyWarning", "__version__"]
