"""pjrtx: run JAX on Apple's MLX through a PJRT plugin.

Installing the package registers the plugin with JAX (entry point group
``jax_plugins``); ``jax.devices()`` then lists the ``pjrtx`` device.
"""
from __future__ import annotations

__version__ = "0.1.0"
PLATFORM = "pjrtx"
