"""One process of tests/test_distributed.py: joins a jax.distributed job of
two processes with pjrtx installed, then runs a program on the pjrtx device
and one on XLA:CPU and prints their results as JSON."""
import json
import os
import sys

os.environ.setdefault("JAX_PLATFORMS", "pjrtx,cpu")

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402

from pjrtx import jax_plugin  # noqa: E402

jax_plugin.ensure_registered()

port, pid = sys.argv[1], int(sys.argv[2])
jax.distributed.initialize(coordinator_address=f"127.0.0.1:{port}", num_processes=2,
                           process_id=pid, initialization_timeout=60)
x = np.arange(6, dtype=np.float32) + pid
out = {}
for backend in ("pjrtx", "cpu"):
    dev = jax.local_devices(backend=backend)[0]
    y = jax.jit(lambda a: jnp.tanh(a) * 2 + a.sum())(jax.device_put(x, dev))
    out[backend] = np.asarray(y).tolist()
out["process_index"] = jax.process_index("cpu")
out["pjrtx_process_index"] = jax.process_index("pjrtx")
out["pjrtx_local_devices"] = len(jax.local_devices(backend="pjrtx"))
# Stay joined for a moment: jaxlib's process-info watcher calls
# PJRT_Client_UpdateGlobalProcessInfo on the plugin while processes live.
import time  # noqa: E402

time.sleep(float(os.environ.get("PJRTX_TEST_LINGER_S", "3")))
print("RESULT " + json.dumps(out), flush=True)
jax.distributed.shutdown()
