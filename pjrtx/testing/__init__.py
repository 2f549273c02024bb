"""Running pytest selections in child processes, shared by `python -m pjrtx
conformance` and `python -m pjrtx compare`: engine.py runs one selection
to the end (a crash or a hang costs one test) and pytest_events.py is the
plugin it loads into the child to hear of each test."""
