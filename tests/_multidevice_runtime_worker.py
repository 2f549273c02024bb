"""Worker of tests/test_multidevice_runtime.py (its own process: the device
count is read when the pjrtx client is created). Prints one line per check."""
import os, sys, threading, time
os.environ["PJRTX_DEVICES"] = "4"; os.environ["JAX_PLATFORMS"] = "pjrtx,cpu"
os.environ.setdefault("PJRTX_COLLECTIVE_TIMEOUT_S", "60")
from pjrtx import jax_plugin; jax_plugin.ensure_registered()
import jax, jax.numpy as jnp, numpy as np
from jax.sharding import Mesh, PartitionSpec as P, NamedSharding
m = Mesh(np.array(jax.devices()[:4]), ("x",))
f = jax.jit(jax.shard_map(lambda a: jax.lax.psum(a, "x"), mesh=m, in_specs=P("x"), out_specs=P()))
g = jax.jit(jax.shard_map(lambda a: jax.lax.all_gather(a * 2, "x", tiled=True), mesh=m, in_specs=P("x"), out_specs=P(), check_vma=False))
x = np.arange(8 * 3, dtype=np.float32).reshape(8, 3)
errs = []
def loop(fn, want):
    try:
        for _ in range(60):
            np.testing.assert_array_equal(np.asarray(fn(x)), want)
    except Exception as e:
        errs.append(e)
ts = [threading.Thread(target=loop, args=(f, x.reshape(4, 2, 3).sum(0))), threading.Thread(target=loop, args=(g, x * 2))]
[t.start() for t in ts]; [t.join(120) for t in ts]
print("ALIVE", [t.is_alive() for t in ts], "ERRS", errs)
def cb(v):
    if v[0, 0] >= 12: raise ValueError("device-specific failure")
    return v
h = jax.jit(jax.shard_map(lambda a: jax.lax.psum(jax.pure_callback(cb, jax.ShapeDtypeStruct(a.shape, a.dtype), a), "x"), mesh=m, in_specs=P("x"), out_specs=P()))
t0 = time.time()
try:
    np.asarray(h(x)); print("NO ERROR")
except Exception as e:
    print("RAISED", type(e).__name__, str(e).replace("\n", " ")[:2000], "after", round(time.time() - t0, 1))
