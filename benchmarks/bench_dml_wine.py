"""The DirectML host under Wine (harness/eps/dml_wine): what it costs and what this device does.

    python benchmarks/bench_dml_wine.py [--repeat N] [--only start,requests,batched,fusion,fp16,parallel]

Measures, on this machine, in one run:
- start: a host's start (Xvfb + Wine + Direct3D 12 + ONNX Runtime, up to its first answer),
  its very first session, and its close;
- requests: one request (session build + one run + read-back) of a one-node MaxPool, RoiAlign
  16 and MaxRoiPool, the first and the following ones, with the EP's own DirectML device per
  session (ORT's device_id path) and with the host's shared device;
- batched: ONE model holding K independent one-node subgraphs (each its own inputs and outputs),
  K = 8, 32, 128 (shared device): the request's time, per node, placement and outputs against
  the CPU EP;
- fusion: DirectML graph fusion on vs off (``ep.dml.disable_graph_fusion``) for Y = Relu(X) + X
  (8 elements) and a lone Cast uint32 -> int64;
- fp16: whether the DML EP takes float16 MaxPool / RoiAlign / MaxRoiPool nodes on this device;
- parallel: two hosts at once, each with its own Xvfb and sharing one, against one host alone.
Times are wall-clock seconds on the client (``time.perf_counter``); host-side build/run seconds
come from the host's own timer. Prints one JSON document.
"""

from __future__ import annotations

import argparse
import json
import statistics
import threading
import time

import numpy as np
import onnxruntime as ort
from onnx import TensorProto, helper

from ep_testbed.harness.eps.dml_wine.host import DmlWineHost, read_host_json, start_xvfb

DML = "DmlExecutionProvider"
FUSION_ON = {"session.disable_cpu_ep_fallback": "1", "session.record_ep_graph_assignment_info": "1"}


def model(nodes, inputs, outputs, opset=16, ir_version=8) -> bytes:
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info(n, t, s) for n, t, s in inputs],
                              [helper.make_tensor_value_info(n, t, None) for n, t in outputs])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)],
                             ir_version=ir_version).SerializeToString()


def linux_cpu(model_bytes, feeds):
    so = ort.SessionOptions()
    so.log_severity_level = 3
    return ort.InferenceSession(model_bytes, so, providers=["CPUExecutionProvider"]).run(None, feeds)


def max_pool_nodes(k, rng, dtype=TensorProto.FLOAT, npdtype=np.float32):
    nodes, inputs, outputs, feeds = [], [], [], {}
    for i in range(k):
        nodes.append(helper.make_node("MaxPool", [f"X{i}"], [f"Y{i}", f"I{i}"], name=f"pool{i}",
                                      kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1]))
        inputs.append((f"X{i}", dtype, [1, 4, 16, 16]))
        outputs += [(f"Y{i}", dtype), (f"I{i}", TensorProto.INT64)]
        feeds[f"X{i}"] = rng.standard_normal((1, 4, 16, 16)).astype(npdtype)
    return nodes, inputs, outputs, feeds


def roi_align_nodes(k, rng, dtype=TensorProto.FLOAT, npdtype=np.float32):
    nodes, inputs, outputs, feeds = [], [], [], {}
    for i in range(k):
        nodes.append(helper.make_node("RoiAlign", [f"X{i}", f"R{i}", f"B{i}"], [f"Y{i}"], name=f"align{i}", mode="avg",
                                      output_height=4, output_width=4, sampling_ratio=2, spatial_scale=0.5,
                                      coordinate_transformation_mode="half_pixel"))
        inputs += [(f"X{i}", dtype, [1, 4, 16, 16]), (f"R{i}", dtype, [3, 4]), (f"B{i}", TensorProto.INT64, [3])]
        outputs.append((f"Y{i}", dtype))
        feeds[f"X{i}"] = rng.standard_normal((1, 4, 16, 16)).astype(npdtype)
        feeds[f"R{i}"] = np.array([[1, 1, 20, 24], [4, 2, 30, 30], [0, 8, 12, 31]], npdtype)
        feeds[f"B{i}"] = np.zeros(3, np.int64)
    return nodes, inputs, outputs, feeds


def max_roi_pool_nodes(k, rng, dtype=TensorProto.FLOAT, npdtype=np.float32):
    nodes, inputs, outputs, feeds = [], [], [], {}
    for i in range(k):
        nodes.append(helper.make_node("MaxRoiPool", [f"X{i}", f"R{i}"], [f"Y{i}"], name=f"mrp{i}",
                                      pooled_shape=[2, 2], spatial_scale=1.0))
        inputs += [(f"X{i}", dtype, [1, 4, 16, 16]), (f"R{i}", dtype, [2, 5])]
        outputs.append((f"Y{i}", dtype))
        feeds[f"X{i}"] = rng.standard_normal((1, 4, 16, 16)).astype(npdtype)
        feeds[f"R{i}"] = np.array([[0, 1, 1, 9, 12], [0, 3, 0, 15, 7]], npdtype)
    return nodes, inputs, outputs, feeds


def timed_requests(host, m, feeds, repeat, **kw):
    times, builds, runs, last = [], [], [], None
    for _ in range(repeat):
        t0 = time.perf_counter()
        last = host.run(m, feeds, **kw)
        times.append(time.perf_counter() - t0)
        builds.append(last.build_seconds)
        runs.append(last.run_seconds)
    rest = times[1:] or times
    return {"first_s": round(times[0], 4), "next_median_s": round(statistics.median(rest), 4),
            "next_min_s": round(min(rest), 4), "host_build_median_s": round(statistics.median(builds[1:] or builds), 4),
            "host_run_median_s": round(statistics.median(runs[1:] or runs), 4),
            "error": None if last.ok else f"{last.error_stage}: {last.error_message[:300]}"}, last


def bench_start(repeat, rng):
    """Start a host, then its very first request (one-node MaxPool, ORT's own device), then close."""
    starts, firsts, closes = [], [], []
    nodes, inputs, outputs, feeds = max_pool_nodes(1, rng)
    m = model(nodes, inputs, outputs)
    for _ in range(repeat):
        t0 = time.perf_counter()
        host = DmlWineHost()
        t1 = time.perf_counter()
        assert host.run(m, feeds).ok
        t2 = time.perf_counter()
        host.close()
        starts.append(t1 - t0)
        firsts.append(t2 - t1)
        closes.append(time.perf_counter() - t2)
    return {"starts_s": [round(s, 3) for s in starts], "median_s": round(statistics.median(starts), 3),
            "first_request_median_s": round(statistics.median(firsts), 3),
            "close_median_s": round(statistics.median(closes), 3)}


def bench_requests(host, repeat, rng):
    out = {}
    for label, build in (("MaxPool", max_pool_nodes), ("RoiAlign", roi_align_nodes), ("MaxRoiPool", max_roi_pool_nodes)):
        nodes, inputs, outputs, feeds = build(1, rng)
        m = model(nodes, inputs, outputs)
        for device, shared in (("own device", False), ("shared device", True)):
            figures, run = timed_requests(host, m, feeds, repeat, shared_device=shared)
            figures["placement"] = run.placement([n.name for n in nodes])
            out[f"{label}, {device}"] = figures
    return out


def bench_batched(host, repeat, rng, ks=(8, 32, 128)):
    out = {}
    for label, build in (("MaxPool", max_pool_nodes), ("RoiAlign", roi_align_nodes), ("MaxRoiPool", max_roi_pool_nodes)):
        for k in ks:
            nodes, inputs, outputs, feeds = build(k, rng)
            m = model(nodes, inputs, outputs)
            figures, run = timed_requests(host, m, feeds, max(2, repeat // 2), shared_device=True)
            names = [n.name for n in nodes]
            if run.ok:
                placement = run.placement(names)
                expected = linux_cpu(m, feeds)
                figures["all_on_dml"] = all(placement.get(n) == DML for n in names)
                figures["max_abs_diff_vs_cpu"] = float(max(np.max(np.abs(a.astype(np.float64) - b.astype(np.float64)))
                                                           for a, b in zip(run.outputs, expected)))
                figures["all_zero_outputs"] = sum(1 for a in run.outputs if a.size and not np.any(a))
            figures["per_node_next_s"] = round(figures["next_median_s"] / k, 5)
            out[f"{label} K={k}"] = figures
    return out


def bench_fusion(host, rng):
    out = {}
    x = rng.standard_normal(8).astype(np.float32)
    relu_add = model([helper.make_node("Relu", ["X"], ["R"], name="relu"), helper.make_node("Add", ["R", "X"], ["Y"], name="add")],
                     [("X", TensorProto.FLOAT, [8])], [("Y", TensorProto.FLOAT)])
    u = rng.integers(0, 2**32 - 1, size=8, dtype=np.uint32)
    cast = model([helper.make_node("Cast", ["U"], ["Y"], name="cast", to=TensorProto.INT64)],
                 [("U", TensorProto.UINT32, [8])], [("Y", TensorProto.INT64)])
    cases = {"Relu(X)+X, 8 elements": (relu_add, {"X": x}, ["relu", "add"]),
             "Cast uint32->int64": (cast, {"U": u}, ["cast"])}
    for k in (8, 32):  # the batched models too
        nodes, inputs, outputs, feeds = max_pool_nodes(k, rng)
        cases[f"MaxPool K={k}"] = (model(nodes, inputs, outputs), feeds, [n.name for n in nodes])
    for label, (m, feeds, names) in cases.items():
        expected = linux_cpu(m, feeds)
        for fusion, entries in (("fusion on", FUSION_ON), ("fusion off", None)):
            run = host.run(m, feeds, config_entries=entries)
            if not run.ok:
                verdict = f"{run.error_stage} error: {run.error_message[:200]}"
            else:
                same = all(np.array_equal(a, b) for a, b in zip(run.outputs, expected))
                zeros = all(a.size and not np.any(a) for a in run.outputs)
                verdict = "matches the CPU EP" if same else ("all zeros" if zeros else "differs from the CPU EP")
                verdict += f"; placement {sorted(set(run.placement(names).values())) or 'fused (no per-node events)'}"
            out[f"{label}, {fusion}"] = verdict
    return out


def bench_fp16(host, rng):
    out = {}
    for label, build in (("MaxPool", max_pool_nodes), ("RoiAlign", roi_align_nodes), ("MaxRoiPool", max_roi_pool_nodes)):
        nodes, inputs, outputs, feeds = build(1, rng, TensorProto.FLOAT16, np.float16)
        m = model(nodes, inputs, outputs)
        strict = host.run(m, feeds)
        allowed = host.run(m, feeds, config_entries={"ep.dml.disable_graph_fusion": "1",
                                                     "session.record_ep_graph_assignment_info": "1"})
        out[label] = {"fallback disabled": "ran" if strict.ok else f"{strict.error_stage} error: {strict.error_message[:160]}",
                      "fallback allowed, placement": allowed.placement([n.name for n in nodes]) if allowed.ok
                      else f"{allowed.error_stage} error: {allowed.error_message[:160]}"}
    return out


def _work(host, m, feeds, n, results, key):
    t0 = time.perf_counter()
    ok = all(host.run(m, feeds, shared_device=True).ok for _ in range(n))
    results[key] = (time.perf_counter() - t0, ok)


def bench_parallel(rng, n=20):
    nodes, inputs, outputs, feeds = roi_align_nodes(8, rng)
    m = model(nodes, inputs, outputs)
    out = {}
    with DmlWineHost() as alone:
        results = {}
        _work(alone, m, feeds, 2 * n, results, "alone")
        out["one host, 2n requests"] = {"wall_s": round(results["alone"][0], 3), "all_ok": results["alone"][1]}
    for label in ("two hosts, two Xvfb", "two hosts, one shared Xvfb"):
        xvfb = start_xvfb(60, read_host_json()["prefix"]) if "shared" in label else None
        display = xvfb.display if xvfb is not None else None
        try:
            hosts = [DmlWineHost(display=display), DmlWineHost(display=display)]
            results = {}
            threads = [threading.Thread(target=_work, args=(h, m, feeds, n, results, i)) for i, h in enumerate(hosts)]
            t0 = time.perf_counter()
            for t in threads:
                t.start()
            for t in threads:
                t.join()
            out[label + ", n requests each"] = {"wall_s": round(time.perf_counter() - t0, 3),
                                                 "all_ok": all(ok for _, ok in results.values())}
            for h in hosts:
                h.close()
        finally:
            if xvfb is not None:
                xvfb.release()
    out["n"] = n
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=6)
    parser.add_argument("--only", default="start,requests,batched,fusion,fp16,parallel")
    args = parser.parse_args()
    parts = set(args.only.split(","))
    rng = np.random.default_rng(7)
    report = {"cpu_count": __import__("os").cpu_count()}
    if "start" in parts:
        report["start"] = bench_start(args.repeat, rng)
    if parts & {"requests", "batched", "fusion", "fp16"}:
        with DmlWineHost() as host:
            report["host"] = {k: host.info[k] for k in ("onnxruntime_version", "wine_version")}
            report["host"]["directml"] = host.info["directml_dll"].get("file_version")
            report["host"]["adapter"] = host.info["adapters"][0]["description"] if host.info["adapters"] else None
            if "requests" in parts:
                report["requests"] = bench_requests(host, args.repeat, rng)
            if "batched" in parts:
                report["batched"] = bench_batched(host, args.repeat, rng)
            if "fusion" in parts:
                report["fusion"] = bench_fusion(host, rng)
            if "fp16" in parts:
                report["fp16"] = bench_fp16(host, rng)
    if "parallel" in parts:
        report["parallel"] = bench_parallel(rng)
    print(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
