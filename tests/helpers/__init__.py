"""Shared test helpers, imported as ``tests.helpers.<module>`` (``pythonpath = ["."]`` in
pyproject's pytest section puts the repository root on ``sys.path``):

* ``records``    -- ``RequestRecord`` builders (a streamed request at chosen token times);
* ``fakeserver`` -- the in-process fake server (scripted streams on a virtual clock) and
  ``FakeServerPlugin``, which implements the plugin's transport/clock hooks for pytester runs;
* ``rawserver``  -- a raw-socket HTTP server for byte-exact faults;
* ``connsim``    -- simulated connections (connect/TLS phases) for the transport tests;
* ``nginxproxy`` -- nginx started with its own prefix and config, for the proxy tier.
"""
