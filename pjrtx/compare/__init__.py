"""``python -m pjrtx compare -- pytest ARGS``: one pytest selection (any
library's suite, or a user's own) run twice, on pjrtx as the default backend
and on XLA:CPU, and the tests whose outcomes differ (runner.py). Each run
streams per-test events through pjrtx.testing.pytest_events, so a crash
or a hang costs one test, and pytest_plugin.py undoes a suite's pin of JAX
to the CPU on the pjrtx side.
"""
