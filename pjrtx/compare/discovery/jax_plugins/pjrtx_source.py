"""JAX's path-based plugin discovery (the `jax_plugins` namespace package)
for a pjrtx that is not installed (a source checkout on PYTHONPATH), which
has no `jax_plugins` entry point. `python -m pjrtx compare` puts the folder
above this one on PYTHONPATH for its pjrtx run only, so a suite's own
`import jax` finds pjrtx the way an installed package does."""


def initialize():
    from pjrtx import jax_plugin

    jax_plugin.initialize()
