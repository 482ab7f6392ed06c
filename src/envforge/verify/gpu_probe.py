# mypy: ignore-errors
# (a probe script: run by the environment's own interpreter, importing optional GPU packages)
"""GPU probe run inside the environment's own interpreter (stdlib + the environment's torch).

argv[1] is JSON with ``mode``:

* ``info``: machine facts: NVIDIA device nodes, driver (NVML), torch and its CUDA runtime, arch
  list, NCCL version, each GPU's name and compute capability.
* ``op``: one small operation of one native package (``package``): torch, triton, flashinfer,
  sgl_kernel, cupy.
* ``allreduce``: an all-reduce across ``world`` GPUs, one process per GPU (this interpreter started
  again per rank, NCCL backend, TCP rendezvous on a free port), at each of ``sizes`` bytes of bf16;
  ``set`` variables are set and ``unset`` removed in every rank before NCCL starts. Ranks past
  ``deadline_s`` are killed and the result says so (field case B12).

Prints one JSON object on its last line. Never raises: errors are reported in the JSON.
"""

import json
import os
import socket
import subprocess
import sys
import tempfile
import time
import traceback

WORKER = r'''
import json, os, sys
cfg = json.loads(sys.argv[1]); rank = int(sys.argv[2])
for k in cfg["unset"]:
    os.environ.pop(k, None)
os.environ.update(cfg["set"])
import torch
import torch.distributed as dist
torch.cuda.set_device(rank)
dev = torch.device("cuda", rank)
dist.init_process_group("nccl", init_method="tcp://127.0.0.1:%d" % cfg["port"], rank=rank,
                        world_size=cfg["world"], device_id=dev)
rows = []
for nbytes in cfg["sizes"]:
    x = torch.ones(nbytes // 2, dtype=torch.bfloat16, device=dev)
    dist.all_reduce(x)
    torch.cuda.synchronize()
    ok = bool((x == cfg["world"]).all().item())
    x.zero_()
    iters = max(20, min(500, (256 << 20) // max(nbytes, 1)))
    for _ in range(10):
        dist.all_reduce(x)
    per_call = []
    for _ in range(cfg["repeats"]):
        torch.cuda.synchronize()
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        for _ in range(iters):
            dist.all_reduce(x)
        end.record()
        end.synchronize()
        per_call.append(start.elapsed_time(end) * 1000.0 / iters)
    s = sorted(per_call)
    rows.append({"bytes": nbytes, "iters": iters, "us": round(s[len(s) // 2], 2),
                 "us_runs": [round(v, 2) for v in per_call], "ok": ok})
if rank == 0:
    nccl = {k: v for k, v in sorted(os.environ.items()) if k.startswith(("NCCL_", "TORCH_NCCL_"))}
    with open(cfg["out"], "w") as f:
        json.dump({"rows": rows, "env": nccl}, f)
dist.destroy_process_group()
'''


def _driver():
    import ctypes

    try:
        nvml = ctypes.CDLL("libnvidia-ml.so.1")
        if nvml.nvmlInit_v2() != 0:
            return None
        buf = ctypes.create_string_buffer(96)
        if nvml.nvmlSystemGetDriverVersion(buf, 96) != 0:
            return None
        return buf.value.decode()
    except (OSError, AttributeError):
        return None


def _err(exc):
    return "%s: %s" % (type(exc).__name__, str(exc).strip().splitlines()[-1] if str(exc).strip() else "")


def libraries(prefix):
    """Which copy of a shared library (file name starting with ``prefix``, e.g. ``libnccl.so``) this
    process has mapped, and every copy it could have loaded (field case B31: a wheel's libnccl
    shadowed by ``LD_LIBRARY_PATH``, or two copies loaded at once).

    ``loaded``: real paths in ``/proc/self/maps`` (what the dynamic loader really mapped), sorted;
    ``candidates``: real paths of the files in ``LD_LIBRARY_PATH`` directories, in every
    ``nvidia/*/lib`` directory on ``sys.path`` (the pip CUDA wheels) and in ``ldconfig -p``.
    """
    loaded = []
    try:
        with open("/proc/self/maps") as f:
            for line in f:
                parts = line.split(None, 5)
                path = parts[5].strip() if len(parts) == 6 else ""
                if os.path.basename(path).startswith(prefix):
                    real = os.path.realpath(path)
                    if real not in loaded:
                        loaded.append(real)
    except OSError:
        pass
    dirs = [d for d in os.environ.get("LD_LIBRARY_PATH", "").split(":") if d]
    for entry in sys.path:
        nvidia = os.path.join(entry, "nvidia")
        if os.path.isdir(nvidia):
            dirs += sorted(os.path.join(nvidia, d, "lib") for d in os.listdir(nvidia))
    found = []
    for d in dirs:
        try:
            names = sorted(os.listdir(d))
        except OSError:
            continue
        found += [os.path.join(d, n) for n in names if n.startswith(prefix)]
    try:
        cache = subprocess.run(["ldconfig", "-p"], capture_output=True, text=True, timeout=10).stdout
        found += [ln.rsplit("=>", 1)[1].strip() for ln in cache.splitlines()
                  if "=>" in ln and ln.strip().startswith(prefix)]
    except (OSError, subprocess.SubprocessError):
        pass
    candidates = []
    for path in found:
        real = os.path.realpath(path)
        if os.path.isfile(real) and real not in candidates:
            candidates.append(real)
    return {"loaded": sorted(loaded), "candidates": candidates}


def info(cfg):
    out = {"python": sys.version.split()[0], "devices_present": os.path.exists("/dev/nvidiactl"),
           "driver": _driver(), "torch": None, "torch_error": None, "cuda_available": False,
           "cuda_runtime": None, "arch_list": [], "nccl": None, "gpus": []}
    if out["driver"]:
        out["devices_present"] = True
    try:
        import torch
    except Exception as exc:  # noqa: BLE001 - reported, not raised
        out["torch_error"] = _err(exc)
        return out
    out["torch"] = torch.__version__
    out["cuda_runtime"] = torch.version.cuda
    try:
        out["cuda_available"] = bool(torch.cuda.is_available())
        if out["cuda_available"]:
            out["arch_list"] = list(torch.cuda.get_arch_list())
            for i in range(torch.cuda.device_count()):
                major, minor = torch.cuda.get_device_capability(i)
                out["gpus"].append({"index": i, "name": torch.cuda.get_device_name(i),
                                    "capability": "%d.%d" % (major, minor)})
            try:
                v = torch.cuda.nccl.version()
                out["nccl"] = ".".join(str(p) for p in v) if isinstance(v, tuple) else str(v)
            except Exception as exc:  # noqa: BLE001
                out["nccl_error"] = _err(exc)
    except Exception as exc:  # noqa: BLE001
        out["torch_error"] = _err(exc)
    out["nccl_libraries"] = libraries("libnccl.so")  # after torch loaded its NCCL (B31)
    return out


def _op_torch():
    import torch

    a = torch.randn(64, 64, device="cuda", dtype=torch.bfloat16)
    return "bf16 matmul 64x64: sum %.3f" % float((a @ a).float().abs().sum().item())


_TRITON_KERNEL = """
import triton
import triton.language as tl


@triton.jit
def add(x, y, out, n, BLOCK: tl.constexpr):
    i = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = i < n
    tl.store(out + i, tl.load(x + i, mask=m) + tl.load(y + i, mask=m), mask=m)
"""


def _op_triton():
    import importlib.util

    import torch
    import triton

    # triton.jit reads the kernel's source file: a probe run with -c has none, so write one.
    path = os.path.join(tempfile.mkdtemp(prefix="envforge-triton-"), "envforge_triton_add.py")
    with open(path, "w") as f:
        f.write(_TRITON_KERNEL)
    spec = importlib.util.spec_from_file_location("envforge_triton_add", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    x = torch.ones(1000, device="cuda")
    out = torch.empty_like(x)
    mod.add[(4,)](x, x, out, 1000, BLOCK=256)
    return "triton %s add kernel: sum %.1f" % (triton.__version__, float(out.sum().item()))


def _op_flashinfer():
    import flashinfer

    return "import flashinfer %s (kernels are JIT-compiled on first use; not run here)" % flashinfer.__version__


def _op_sgl_kernel():
    import sgl_kernel
    import torch

    x = torch.randn(4, 256, device="cuda", dtype=torch.float16)
    w = torch.ones(256, device="cuda", dtype=torch.float16)
    y = sgl_kernel.rmsnorm(x, w)
    torch.cuda.synchronize()
    return "sgl_kernel rmsnorm 4x256: finite %s" % bool(torch.isfinite(y).all().item())


def _op_cupy():
    import cupy

    return "cupy arange(1000).sum() = %d" % int(cupy.arange(1000).sum().get())


OPS = {"torch": _op_torch, "triton": _op_triton, "flashinfer": _op_flashinfer,
       "sgl_kernel": _op_sgl_kernel, "cupy": _op_cupy}


def op(cfg):
    name = cfg["package"]
    start = time.monotonic()
    try:
        detail = OPS[name]()
        return {"package": name, "ok": True, "detail": detail, "s": round(time.monotonic() - start, 3)}
    except Exception as exc:  # noqa: BLE001
        tail = traceback.format_exc().strip().splitlines()[-3:]
        return {"package": name, "ok": False, "error": _err(exc), "traceback": tail,
                "s": round(time.monotonic() - start, 3)}


def _free_port():
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def allreduce(cfg):
    """Run the ranks; once more on a new port when the rendezvous port was taken meanwhile."""
    out = _allreduce_once(cfg)
    if out.get("returncodes") and any(out["returncodes"]) and "address already in use" in \
            json.dumps(out.get("logs", "")).lower():
        out = _allreduce_once(cfg)
        out["port_retried"] = True
    return out


def _allreduce_once(cfg):
    tmp = tempfile.mkdtemp(prefix="envforge-allreduce-")
    wcfg = {"world": cfg["world"], "sizes": cfg["sizes"], "set": cfg.get("set", {}),
            "unset": cfg.get("unset", []), "repeats": cfg.get("repeats", 5), "port": _free_port(),
            "out": os.path.join(tmp, "rank0.json")}
    logs = [open(os.path.join(tmp, "rank%d.log" % r), "w+") for r in range(cfg["world"])]
    procs = [subprocess.Popen([sys.executable, "-c", WORKER, json.dumps(wcfg), str(r)],
                              stdout=logs[r], stderr=subprocess.STDOUT) for r in range(cfg["world"])]
    deadline = time.monotonic() + cfg.get("deadline_s", 90)
    timed_out = False
    while any(p.poll() is None for p in procs):
        if time.monotonic() > deadline:
            timed_out = True
            for p in procs:
                p.kill()
            break
        time.sleep(0.1)
    codes = [p.wait() for p in procs]
    tails = []
    for f in logs:
        f.seek(0)
        tails.append(f.read().strip().splitlines()[-5:])
        f.close()
    out = {"world": cfg["world"], "timed_out": timed_out, "returncodes": codes, "port": wcfg["port"],
           "elapsed_s": round(time.monotonic() - deadline + cfg.get("deadline_s", 90), 2)}
    if os.path.exists(wcfg["out"]):
        with open(wcfg["out"]) as f:
            out.update(json.load(f))
    else:
        out["env"] = {k: v for k, v in sorted(os.environ.items()) if k.startswith(("NCCL_", "TORCH_NCCL_"))
                      and k not in wcfg["unset"]}
        out["env"].update({k: v for k, v in wcfg["set"].items() if k.startswith(("NCCL_", "TORCH_NCCL_"))})
        out["env"] = dict(sorted(out["env"].items()))
    if any(codes) or timed_out:
        out["logs"] = tails
    return out


def main():
    cfg = json.loads(sys.argv[1])
    mode = cfg["mode"]
    result = {"info": info, "op": op, "allreduce": allreduce}[mode](cfg)
    print(json.dumps(result))


if __name__ == "__main__":
    main()
