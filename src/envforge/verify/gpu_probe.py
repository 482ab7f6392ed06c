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
* ``topology``: how each pair of GPUs is linked (:func:`topology`): from NVML through pynvml
  (nvidia-ml-py) when it imports, else from ``nvidia-smi topo -m``.

Prints one JSON object on its last line. Never raises: errors are reported in the JSON.
"""

import json
import os
import re
import socket
import subprocess
import sys
import tempfile
import time
import traceback

WORKER = r"""
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
"""


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
        found += [
            ln.rsplit("=>", 1)[1].strip() for ln in cache.splitlines() if "=>" in ln and ln.strip().startswith(prefix)
        ]
    except (OSError, subprocess.SubprocessError):
        pass
    candidates = []
    for path in found:
        real = os.path.realpath(path)
        if os.path.isfile(real) and real not in candidates:
            candidates.append(real)
    return {"loaded": sorted(loaded), "candidates": candidates}


def info(cfg):
    out = {
        "python": sys.version.split()[0],
        "devices_present": os.path.exists("/dev/nvidiactl"),
        "driver": _driver(),
        "torch": None,
        "torch_error": None,
        "cuda_available": False,
        "cuda_runtime": None,
        "arch_list": [],
        "nccl": None,
        "gpus": [],
    }
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
                out["gpus"].append(
                    {"index": i, "name": torch.cuda.get_device_name(i), "capability": "%d.%d" % (major, minor)}
                )
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


OPS = {
    "torch": _op_torch,
    "triton": _op_triton,
    "flashinfer": _op_flashinfer,
    "sgl_kernel": _op_sgl_kernel,
    "cupy": _op_cupy,
}


def op(cfg):
    name = cfg["package"]
    start = time.monotonic()
    try:
        detail = OPS[name]()
        return {"package": name, "ok": True, "detail": detail, "s": round(time.monotonic() - start, 3)}
    except Exception as exc:  # noqa: BLE001
        tail = traceback.format_exc().strip().splitlines()[-3:]
        return {
            "package": name,
            "ok": False,
            "error": _err(exc),
            "traceback": tail,
            "s": round(time.monotonic() - start, 3),
        }


def _free_port():
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def allreduce(cfg):
    """Run the ranks; once more on a new port when the rendezvous port was taken meanwhile."""
    out = _allreduce_once(cfg)
    if (
        out.get("returncodes")
        and any(out["returncodes"])
        and "address already in use" in json.dumps(out.get("logs", "")).lower()
    ):
        out = _allreduce_once(cfg)
        out["port_retried"] = True
    return out


def _allreduce_once(cfg):
    tmp = tempfile.mkdtemp(prefix="envforge-allreduce-")
    wcfg = {
        "world": cfg["world"],
        "sizes": cfg["sizes"],
        "set": cfg.get("set", {}),
        "unset": cfg.get("unset", []),
        "repeats": cfg.get("repeats", 5),
        "port": _free_port(),
        "out": os.path.join(tmp, "rank0.json"),
    }
    logs = [open(os.path.join(tmp, "rank%d.log" % r), "w+") for r in range(cfg["world"])]
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", WORKER, json.dumps(wcfg), str(r)], stdout=logs[r], stderr=subprocess.STDOUT
        )
        for r in range(cfg["world"])
    ]
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
    out = {
        "world": cfg["world"],
        "timed_out": timed_out,
        "returncodes": codes,
        "port": wcfg["port"],
        "elapsed_s": round(time.monotonic() - deadline + cfg.get("deadline_s", 90), 2),
    }
    if os.path.exists(wcfg["out"]):
        with open(wcfg["out"]) as f:
            out.update(json.load(f))
    else:
        out["env"] = {
            k: v
            for k, v in sorted(os.environ.items())
            if k.startswith(("NCCL_", "TORCH_NCCL_")) and k not in wcfg["unset"]
        }
        out["env"].update({k: v for k, v in wcfg["set"].items() if k.startswith(("NCCL_", "TORCH_NCCL_"))})
        out["env"] = dict(sorted(out["env"].items()))
    if any(codes) or timed_out:
        out["logs"] = tails
    return out


#: nvidia-smi's matrix labels of a path over PCIe, nearest first, by NVML's common-ancestor level
#: (nvmlGpuTopologyLevel_t in nvml.h: INTERNAL 0, SINGLE 10, MULTIPLE 20, HOSTBRIDGE 30, NODE 40,
#: SYSTEM 50; the legend of ``nvidia-smi topo -m``: PIX at most one PCIe bridge, PXB several
#: bridges, PHB through a host bridge, NODE between host bridges of one NUMA node, SYS across the
#: SMP interconnect between NUMA nodes). INTERNAL (two GPUs of one board) has no matrix label.
NVML_LEVELS = {0: "INTERNAL", 10: "PIX", 20: "PXB", 30: "PHB", 40: "NODE", 50: "SYS"}
_ANSI = re.compile(r"\x1b\[[0-9;]*m")
_GPU = re.compile(r"^GPU(\d+)$")


def parse_topo_matrix(text):
    """The GPU-to-GPU cells of ``nvidia-smi topo -m``: ``{"gpus": [0, 1, ...], "links": {"0-1": "NV18"}}``.

    The matrix (nvidia-smi's own format; samples in tests/data/topology/): a header row naming the
    columns (``GPU0 GPU1 ... NIC0 ... CPU Affinity NUMA Affinity GPU NUMA ID``), then one row per
    device (``GPU0  X  NV18 ...``). GPU columns come first, so a GPU row's cells are its first
    tokens after the name; ``X`` is the GPU itself. Labels are kept as printed: ``NV#`` (a bonded
    set of # NVLinks), ``PIX``, ``PXB``, ``PHB``, ``NODE``, ``SYS`` (older drivers: ``SOC``). Lines
    outside the matrix (legend, NIC rows, comments) and terminal colour codes are ignored. Pairs
    are keyed ``"i-j"`` with ``i < j``, from row ``i``. No matrix: ``{"gpus": [], "links": {}}``.
    """
    columns = None
    rows = {}
    for raw in text.splitlines():
        tokens = _ANSI.sub("", raw).split()
        if not tokens or not _GPU.match(tokens[0]):
            continue
        if columns is None:
            if len(tokens) > 1 and tokens[1] == "X":
                continue  # a row before any header: not nvidia-smi's matrix
            columns = []
            for tok in tokens:
                m = _GPU.match(tok)
                if not m:
                    break
                columns.append(int(m.group(1)))
            continue
        rows[int(_GPU.match(tokens[0]).group(1))] = tokens[1 : 1 + len(columns)]
    if not columns:
        return {"gpus": [], "links": {}}
    links = {}
    for i in sorted(rows):
        for col, cell in zip(columns, rows[i]):
            if i < col:
                links["%d-%d" % (i, col)] = cell
    return {"gpus": sorted(rows), "links": links}


def nvml_links(nvml):
    """Each GPU pair's link from NVML (``nvml``: the pynvml module), labelled as ``nvidia-smi topo -m`` does.

    A pair whose NVLink P2P status is OK (``nvmlDeviceGetP2PStatus`` with
    ``NVML_P2P_CAPS_INDEX_NVLINK``, as vLLM's ``is_fully_connected`` asks) is ``NV<n>``: ``n`` the
    active links (``nvmlDeviceGetNvLinkState``) whose remote end (``nvmlDeviceGetNvLinkRemotePciInfo``)
    is the peer; none to the peer means the links go to NVSwitches and ``n`` is all active links
    (an NVSwitch box shows ``NV18`` per pair). Any other pair gets the PCIe label of its common
    ancestor (``nvmlDeviceGetTopologyCommonAncestor``, :data:`NVML_LEVELS`). Source: the NVML API
    reference (https://docs.nvidia.com/deploy/nvml-api/), "Device Queries" (topology, P2P, NvLink).
    :returns: ``{"gpus": [0, ...], "links": {"0-1": "NV18"}}``. NVML errors propagate.
    """
    nvml.nvmlInit()
    try:
        count = nvml.nvmlDeviceGetCount()
        handles = [nvml.nvmlDeviceGetHandleByIndex(i) for i in range(count)]
        buses = [_bus(nvml.nvmlDeviceGetPciInfo(h).busId) for h in handles]
        remotes = [_nvlink_remotes(nvml, h) for h in handles]
        links = {}
        for i in range(count):
            for j in range(i + 1, count):
                status = nvml.nvmlDeviceGetP2PStatus(handles[i], handles[j], nvml.NVML_P2P_CAPS_INDEX_NVLINK)
                if status == nvml.NVML_P2P_STATUS_OK:
                    direct = sum(1 for r in remotes[i] if r == buses[j])
                    n = direct or len(remotes[i])
                    links["%d-%d" % (i, j)] = "NV%d" % n if n else "NVLINK"  # link count unknown
                else:
                    level = nvml.nvmlDeviceGetTopologyCommonAncestor(handles[i], handles[j])
                    links["%d-%d" % (i, j)] = NVML_LEVELS.get(int(level), "LEVEL%d" % int(level))
        return {"gpus": list(range(count)), "links": links}
    finally:
        nvml.nvmlShutdown()


def _bus(bus_id):
    value = bus_id.decode() if isinstance(bus_id, bytes) else str(bus_id)
    return value.lower()[-12:]  # "00000000:18:00.0" and the legacy "0000:18:00.0" alike


def _nvlink_remotes(nvml, handle):
    """The remote PCI bus id of each active NVLink of ``handle``; [] where NVLink is not supported."""
    out = []
    for link in range(getattr(nvml, "NVML_NVLINK_MAX_LINKS", 18)):
        try:
            if nvml.nvmlDeviceGetNvLinkState(handle, link) != nvml.NVML_FEATURE_ENABLED:
                continue
            out.append(_bus(nvml.nvmlDeviceGetNvLinkRemotePciInfo(handle, link).busId))
        except nvml.NVMLError:
            continue  # no such link on this GPU (NVML_ERROR_NOT_SUPPORTED / INVALID_ARGUMENT)
    return out


def _visible(gpus, links, env):
    """Keep the GPUs ``CUDA_VISIBLE_DEVICES`` names by index (NVML and nvidia-smi number GPUs the
    same way); UUIDs or an unset variable keep every GPU the driver lists."""
    value = env.get("CUDA_VISIBLE_DEVICES")
    if value is None or not all(p.strip().isdigit() for p in value.split(",") if p.strip()):
        return gpus, links
    keep = sorted({int(p) for p in value.split(",") if p.strip()} & set(gpus))
    kept = {k: v for k, v in links.items() if all(int(n) in keep for n in k.split("-"))}
    return keep, kept


def _nvidia_smi_topo():
    """``nvidia-smi topo -m``'s text, or None and why not."""
    try:
        run = subprocess.run(["nvidia-smi", "topo", "-m"], capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.SubprocessError) as exc:
        return None, _err(exc)
    if run.returncode != 0:
        return None, "exit status %d: %s" % (run.returncode, (run.stdout + run.stderr).strip()[:200])
    return run.stdout, None


def topology(cfg):
    """How each pair of GPUs is linked: NVML through pynvml first, else ``nvidia-smi topo -m``
    (``cfg["sources"]`` may name fewer or reorder them: ``["nvidia-smi"]`` records that source alone).

    :returns: ``{"source": "nvml" | "nvidia-smi" | None, "gpus": [index, ...], "links": {"0-1":
        "NV18", ...}, "tried": [why an earlier source gave nothing, ...]}``; GPUs are the driver's
        indices, limited to those ``CUDA_VISIBLE_DEVICES`` names by index. ``source`` None: no
        source answered (``tried`` says why).
    """
    tried = []
    for source in cfg.get("sources", ["nvml", "nvidia-smi"]):
        found, why = (_from_nvml if source == "nvml" else _from_nvidia_smi)()
        if found is not None:
            gpus, links = _visible(found["gpus"], found["links"], os.environ)
            return {"source": source, "gpus": gpus, "links": links, "tried": tried}
        tried.append("%s: %s" % (source, why))
    return {"source": None, "gpus": [], "links": {}, "tried": tried}


def _from_nvml():
    try:
        import pynvml
    except Exception as exc:  # noqa: BLE001 - an absent or broken package: the next source
        return None, _err(exc)
    try:
        return nvml_links(pynvml), None
    except Exception as exc:  # noqa: BLE001
        return None, _err(exc)


def _from_nvidia_smi():
    text, why = _nvidia_smi_topo()
    if text is None:
        return None, why
    found = parse_topo_matrix(text)
    return (found, None) if found["gpus"] else (None, "nvidia-smi topo -m printed no GPU matrix")


def main():
    cfg = json.loads(sys.argv[1])
    mode = cfg["mode"]
    result = {"info": info, "op": op, "allreduce": allreduce, "topology": topology}[mode](cfg)
    print(json.dumps(result))


if __name__ == "__main__":
    main()
