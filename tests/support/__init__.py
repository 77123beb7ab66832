"""What the tests share that is not a fixture: store specifications, clocks,
schedules, strategies, helpers of one subsystem's tests, and the worker
scripts that tests run as OS processes (``python -m tests.support.<worker>``).
Fixtures stay in the conftest.py files; no test module imports another."""
