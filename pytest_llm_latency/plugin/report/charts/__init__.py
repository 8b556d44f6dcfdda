"""Pure chart functions for the HTML report: numbers in, SVG strings out (no I/O, no pytest)."""
from .arms import ArmPoint, arms_chart
from .cdf import BudgetLine, CdfSeries, Mark, cdf_chart
from .roofline import Decode, roofline_chart
from .scatter import BucketStep, PromptPoint, ttft_scatter
from .timeline import MetricSeries, RequestSpan, timeline_chart

__all__ = ["BudgetLine", "CdfSeries", "Mark", "cdf_chart", "Decode", "roofline_chart",
           "MetricSeries", "RequestSpan", "timeline_chart", "BucketStep", "PromptPoint", "ttft_scatter",
           "ArmPoint", "arms_chart"]
