"""float64 and complex128 on a GPU device, one stage at a time: which step of
a program (transfer, identity, elementwise, reduction, conversion, constant,
complex128) fails. MLX's GPU back ends have no float64; pjrtx runs f64 work on
MLX's CPU stream (PJRTX_F64=cpu), and this script shows where that holds.

    PJRTX_DEVICE=gpu python jax_smoke/f64_stages.py

Each stage compares with XLA:CPU; exits non-zero if any stage fails."""
import os, traceback
os.environ.setdefault("JAX_PLATFORMS", "pjrtx,cpu")
import jax, jax.numpy as jnp, numpy as np
jax.config.update("jax_enable_x64", True)
from pjrtx import jax_plugin
jax_plugin.ensure_registered()
d = jax.devices("pjrtx")[0]
x = np.arange(6, dtype=np.float64) / 3
def on(dev, f, *args):
    with jax.default_device(dev):
        return jax.jit(f)(*args)


failed = passed = 0
cpu = jax.devices("cpu")[0]


def stage(name, f):
    global failed, passed
    try:
        got = np.asarray(f(d))
        want = np.asarray(f(cpu))
        ok = got.dtype == want.dtype and np.allclose(got, want, rtol=1e-12, atol=0)
        print("OK  " if ok else "DIFF", name, got.ravel()[:3], want.ravel()[:3])
        failed += not ok
        passed += ok
    except Exception as e:
        failed += 1
        print("FAIL", name, type(e).__name__, str(e).splitlines()[0][:200])
stage("put+get", lambda dev: jax.device_put(x, dev))
stage("put+get f32", lambda dev: jax.device_put(x.astype(np.float32), dev))
stage("jit identity", lambda dev: on(dev, lambda a: a, x))
stage("jit add1", lambda dev: on(dev, lambda a: a + 1, x))
stage("jit sin", lambda dev: on(dev, jnp.sin, x))
stage("jit sum", lambda dev: on(dev, jnp.sum, x))
stage("jit astype f32", lambda dev: on(dev, lambda a: a.astype(jnp.float32), x))
stage("jit f32->f64", lambda dev: on(dev, lambda a: a.astype(jnp.float64) * 2, x.astype(np.float32)))
stage("jit const f64", lambda dev: on(dev, lambda: jnp.float64(1.5) * jnp.arange(3.0)))
stage("jit c128 abs", lambda dev: on(dev, jnp.abs, x + 1j * x))
stage("jit c128 mul", lambda dev: on(dev, lambda a: a * a, x + 1j * x))
print(f"{passed} passed, {failed} failed")
raise SystemExit(1 if failed else 0)
