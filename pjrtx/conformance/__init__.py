"""Conformance: JAX's own upstream test files run against the pjrtx device.

``python -m pjrtx conformance --jax-tests DIR [FILES...]`` runs each file in
its own pytest process (see runner.py), streaming per-test events through
pytest_events.py (generic; `python -m pjrtx compare` uses it too) with
pytest_plugin.py making pjrtx JAX's device under test, and writes
results.json and report.md.
"""
