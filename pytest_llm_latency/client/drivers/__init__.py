"""Drivers: one module per way of sending, behind one ``Driver`` protocol (``base.py``), chosen
from the workload by ``registry.driver_for``; where they run is the placement's (``client/placement``),
which no driver tests for.  ``pipeline`` is every driver's measurement around its sending;
``load_report`` what a load run adds to its result.

May import every earlier stage of the client (``transport`` to ``agent``) and ``core``."""
