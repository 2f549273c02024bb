"""Scripts for tests/test_launch.py, one per mode (argv[1]); run under
python -m pjrtx launch or started directly with jax.distributed arguments."""
import os
import sys
import time

mode = sys.argv[1]

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402
from jax.sharding import Mesh, NamedSharding  # noqa: E402
from jax.sharding import PartitionSpec as P  # noqa: E402

if mode in ("wrong_address", "coordinator_port_busy"):
    # One process, pjrtx imported first: jaxlib alone would abort (an
    # address nobody serves) or crash (a coordinator port in use).
    import pjrtx  # noqa: F401
    address, pid = sys.argv[2], int(sys.argv[3])
    wait = int(sys.argv[4]) if len(sys.argv) > 4 else 4
    t0 = time.monotonic()
    try:
        jax.distributed.initialize(coordinator_address=address, num_processes=2,
                                   process_id=pid, initialization_timeout=wait)
        print("CONNECTED", flush=True)
    except Exception as e:  # noqa: BLE001 - the test reads the message
        print(f"RAISED after {time.monotonic() - t0:.1f}s {type(e).__name__}: {e}", flush=True)
    # and the process goes on: JAX still works on this process alone
    print("SUM", float(jnp.sum(jnp.arange(4.0))), flush=True)
    sys.exit(0)
elif mode in ("peer_dies", "peer_stuck", "devices_mismatch", "processes_mismatch", "port_in_use"):
    from pjrtx import jax_plugin
    jax_plugin.ensure_registered()
    port, pid = sys.argv[2], int(sys.argv[3])
    address = f"127.0.0.1:{port}"
    if mode == "devices_mismatch":
        os.environ["PJRTX_DEVICES"] = str(1 + pid)  # process 1 has 2, process 0 has 1
    if mode == "port_in_use" and pid == 1:
        os.environ.pop("PJRTX_DISTRIBUTED_PORT", None)  # only process 0 gets the busy port
    # processes_mismatch: process 1 counts 3 processes (the coordinator's
    # service, process 0's, counts 2, so jaxlib lets both connect)
    count = 2 + pid if mode == "processes_mismatch" else 2
    try:
        jax.distributed.initialize(coordinator_address=address, num_processes=count,
                                   process_id=pid, initialization_timeout=20)
        devs = jax.devices("pjrtx")
    except Exception as e:  # noqa: BLE001 - the test reads the message
        print(f"RAISED {type(e).__name__}: {e}", flush=True)
        if mode in ("devices_mismatch", "processes_mismatch"):
            # both fail here: meet at the shutdown barrier, so neither
            # takes the coordination service (process 0's) away from the
            # other before it has read the other's entry
            jax.distributed.shutdown()
        os._exit(0)  # port_in_use: the peer may never get here
else:
    jax.distributed.initialize()
    devs = jax.devices()


def psum(x):
    m = Mesh(np.asarray(devs, dtype=object), ("x",))
    n = len(devs)
    arr = jax.make_array_from_callback((n,), NamedSharding(m, P("x")), lambda i: x[i])
    f = jax.jit(jax.shard_map(lambda a: jax.lax.psum(a, "x"), mesh=m, in_specs=P("x"),
                              out_specs=P(), check_vma=False))
    return float(np.asarray(f(arr).addressable_shards[0].data)[0])


if mode == "ok":
    x = np.arange(len(devs), dtype=np.float32) + 1
    print(f"process {jax.process_index()} of {jax.process_count()} devices {len(devs)} "
          f"psum {psum(x)}", flush=True)
elif mode == "one_fails":
    if jax.process_index() == 1:
        sys.exit(3)
    time.sleep(120)  # the launcher must stop this one
elif mode == "peer_dies":
    x = np.arange(len(devs), dtype=np.float32) + 1
    print(f"first {psum(x)}", flush=True)
    if pid == 1:
        os._exit(9)  # dies between two collectives
    t0 = time.monotonic()
    try:
        print(f"second {psum(x * 2)}", flush=True)
    except Exception as e:  # noqa: BLE001
        print(f"RAISED after {time.monotonic() - t0:.1f}s {type(e).__name__}: {e}", flush=True)
    os._exit(0)  # jax's coordination service would wait for the dead peer at shutdown
elif mode == "peer_stuck":
    x = np.arange(len(devs), dtype=np.float32) + 1
    print(f"first {psum(x)}", flush=True)
    if pid == 1:
        time.sleep(45)  # alive, but never joins the second collective
        os._exit(0)
    t0 = time.monotonic()
    try:
        print(f"second {psum(x * 2)}", flush=True)
    except Exception as e:  # noqa: BLE001
        print(f"RAISED after {time.monotonic() - t0:.1f}s {type(e).__name__}: {e}", flush=True)
    os._exit(0)
