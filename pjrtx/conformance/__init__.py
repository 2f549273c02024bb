"""Conformance: JAX's own upstream test files run against the pjrtx device.

``python -m pjrtx conformance --jax-tests DIR [FILES...]`` runs each file in
its own pytest process (see runner.py; the engine that runs it,
pjrtx/testing/, is shared with `python -m pjrtx compare`) with
pytest_plugin.py making pjrtx JAX's device under test, and writes
results.json and report.md.
"""
