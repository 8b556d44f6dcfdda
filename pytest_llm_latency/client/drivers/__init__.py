"""Drivers: one module per way of sending, behind one ``Driver`` protocol (``base.py``), chosen
from the workload by ``registry.driver_for``."""
