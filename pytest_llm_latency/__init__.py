__version__ = "0.1.0"

from .core.errors import LatencyWarning  # noqa: E402  (public: -W error::pytest_llm_latency.LatencyWarning)

__all__ = ["LatencyWarning", "__version__"]
