"""The EP adapter of ``--ep dml-wine``: ONNX Runtime's real DirectML EP, held in a Windows host
process under Wine (``host``), one host per process that judges cases.

The sessions are built in the host, not here, so this adapter runs them itself
(``holds_sessions``): it sends the model, the feeds and exactly the session config entries an
in-process DirectML session gets (``providers.config_entries``: CPU fallback refused, graph
fusion off, the assignment recorded; the host adds memory pattern off and sequential execution),
and reads back the outputs bit for bit, the profiling trace and the assignment info, from which
placement is proven by the same rule as every other EP (``placement.placement_evidence``).

What the host's life means for a case: the host dying mid-request is the case's ``crash`` and
hanging past its limit its ``timeout`` (``SessionError`` stages), as a dying worker would be;
the next case starts a fresh host. A session that fails while vkd3d refused one of DirectML's
shaders carries the emulation's own lines (``SessionError.emulation``): the emulated device,
not DirectML, failed. So does a session run with graph fusion kept on (``--dml-graph-fusion``)
whose fused partition is large enough for the DML EP to reuse a command list
(``stale_partition``): this device never writes that partition's outputs.

Test hook, read only here and only from the environment, as the worker's ``EP_TESTBED_FAULT``::

    EP_TESTBED_DML_WINE_FAULT="abort=<glob>;hang=<glob>"

makes the DirectML host itself, in place of the first session of a case whose id matches
``<glob>`` (fnmatch; a packed session: of any of its cases), call ``abort()`` or sleep past every limit (the host's test-only requests):
the tests show that a host dying or hanging mid-case costs that case (``crash`` / ``timeout``)
and nothing else. Nothing sets it unless you do.

``--ep-option dml_device=own`` lets ONNX Runtime make a DirectML device per session, as an
application does; the default hands every session the host's one device (the documented
``OrtSessionOptionsAppendExecutionProviderEx_DML`` path: the same kernels, bit-identical
outputs, 0.1-0.25 s less per session on this device).
"""

from __future__ import annotations

import fnmatch
import os
from typing import Any, Callable, ClassVar, Mapping

import numpy as np
import onnx

from ...core.terminal import safe
from .. import placement as placement_mod
from ..ep_run import EpRun, SessionError, current_cases, first_line
from ..holders import EpAdapter
from ..spec import EpNotAvailable, EpSpec, SessionSettings, config_entries
from . import canary
from .host import SETUP_COMMAND, DmlWineHost, HostCrashed, HostError, HostNoDevice, HostRun, HostTimeout, read_host_json

#: The ``--ep`` name of this adapter.
EP_NAME = "dml-wine"
PROVIDER = "DmlExecutionProvider"
#: ``--ep-option`` keys the adapter reads (the rest is refused: the host passes nothing else on).
OPTIONS = {"device_id": "the DXGI adapter index (0: the emulated llvmpipe device)",
           "dml_device": "shared (default: one DirectML device for every session) or own (ONNX Runtime "
                         "makes one per session, as an application does)"}
#: Seconds one request may take before the host is killed (a case's own --timeout, enforced by the
#: worker pool around it, is normally shorter).
REQUEST_TIMEOUT = 600.0
#: The test hook (module docstring): the variable and its actions.
FAULT_ENV = "EP_TESTBED_DML_WINE_FAULT"
FAULT_ACTIONS = ("abort", "hang")
#: How long a planted hang sleeps: longer than any limit (the host's protocol carries a u32 of ms).
HANG_MS = 2**32 - 1
#: With graph fusion kept on, ORT's DML EP records a fused partition of at least this many nodes into
#: a command list once and re-executes it, binding the inputs and outputs in the descriptor heap
#: after recording (``DML_EXECUTION_FLAG_DESCRIPTORS_VOLATILE``; ``minNodeCountToReuseCommandList``
#: in onnxruntime/core/providers/dml/DmlExecutionProvider/src/GraphDescBuilder.h). Legal Direct3D 12;
#: but vkd3d on lavapipe (no descriptor update-after-bind) copies a descriptor table into Vulkan
#: when the command list is recorded, so such a partition never sees its inputs and outputs: its
#: outputs are whatever the buffers held (README, "Graph fusion").
REUSED_COMMAND_LIST_NODES = 5


def planted_fault(case_id: str | None, spec: str | None = None) -> str | None:
    """The action ``EP_TESTBED_DML_WINE_FAULT`` (or ``spec``) plants for ``case_id``: ``"abort"``,
    ``"hang"`` or None. ValueError naming the variable for an item that is not ACTION=GLOB."""
    text = os.environ.get(FAULT_ENV, "") if spec is None else spec
    for item in filter(None, (part.strip() for part in text.split(";"))):
        action, sep, pattern = item.partition("=")
        if not sep or action not in FAULT_ACTIONS:
            raise ValueError(f"{FAULT_ENV}: {item!r} must be ACTION=GLOB with ACTION one of {', '.join(FAULT_ACTIONS)}")
        if case_id is not None and fnmatch.fnmatchcase(case_id, pattern):
            return action
    return None


def stale_partition(model: onnx.ModelProto, assignment: Mapping[str, str] | None) -> int:
    """The node count of the largest partition ORT's DirectML graph fusion would build from
    ``model`` if it reaches ``REUSED_COMMAND_LIST_NODES``, else 0: a partition whose outputs this
    emulated device leaves unwritten (``REUSED_COMMAND_LIST_NODES``). A partition is a group of
    DirectML nodes joined by producer -> consumer edges (the EP's partitioner merges a node with the
    nodes that feed it; nodes that only share a graph input stay apart). ``assignment``: node ->
    provider as ONNX Runtime recorded it (a node it does not name counts as DirectML's); None or
    empty: every node is on DirectML (a session with CPU fallback disabled). Graph optimizations that remove nodes before fusion are not modelled:
    the count can only be too high, never too low."""
    nodes = [n for n in model.graph.node if not assignment or assignment.get(n.name, PROVIDER) == PROVIDER]
    producer = {out: i for i, n in enumerate(nodes) for out in n.output if out}
    parent = list(range(len(nodes)))

    def root(i: int) -> int:
        while parent[i] != i:
            parent[i] = parent[parent[i]]
            i = parent[i]
        return i

    for i, n in enumerate(nodes):
        for name in n.input:
            if name in producer:
                parent[root(producer[name])] = root(i)
    sizes: dict[int, int] = {}
    for i in range(len(nodes)):
        sizes[root(i)] = sizes.get(root(i), 0) + 1
    largest = max(sizes.values(), default=0)
    return largest if largest >= REUSED_COMMAND_LIST_NODES else 0


class WineDmlAdapter(EpAdapter):
    """Holds ``--ep dml-wine`` in this process: a ``DmlWineHost`` started on first use, replaced
    after it crashes or hangs. Implements the adapter interface of ``harness.eps.holders``."""

    holder: ClassVar[str] = EP_NAME
    holds_sessions: ClassVar[bool] = True
    #: vkd3d on Mesa's lavapipe: a Direct3D 12 device emulated on the CPU.
    emulated: ClassVar[bool] = True

    def __init__(self, spec: EpSpec, record: Any = None):
        """``spec``: ``--ep dml-wine`` with its ``--ep-option`` values; ``record``: its EP record."""
        super().__init__(spec, record)
        self._host: DmlWineHost | None = None
        self._setup: dict[str, Any] | None = None
        #: The last host's hello: the device, DirectML's and ONNX Runtime's versions, which stay
        #: the set-up's from one host to the next (a run header needs no host of its own for them).
        self._hello: dict[str, Any] | None = None

    # -- the adapter interface -----------------------------------------------------------------
    @classmethod
    def spec_for(cls, record: Any, options: dict[str, str], *, library: str | None = None,
                 device: str | None = None) -> EpSpec:
        """The spec of ``--ep dml-wine`` (``spec``): the host holds DirectML, so neither
        ``--ep-library`` nor ``--ep-device`` (``EpNotAvailable``)."""
        if library or device is not None:
            raise EpNotAvailable(f"--ep {EP_NAME} holds DirectML in its Wine host: it takes neither "
                                 "--ep-library nor --ep-device (--ep-option device_id=N picks the DXGI adapter)")
        return spec(options)

    def prepare(self) -> None:
        """Check the set-up home and the options (no host is started: that is the first session's)."""
        unknown = sorted(set(self.spec.options) - set(OPTIONS))
        if unknown:
            raise EpNotAvailable(f"--ep {EP_NAME}: unknown --ep-option {', '.join(unknown)}; it takes "
                                 + "; ".join(f"{k} ({v})" for k, v in OPTIONS.items()))
        if self.spec.options.get("dml_device", "shared") not in ("shared", "own"):
            raise EpNotAvailable(f"--ep {EP_NAME}: --ep-option dml_device={self.spec.options['dml_device']}: "
                                 "shared or own")
        if self._setup is None:
            try:
                self._setup = read_host_json()
            except HostError as exc:
                raise EpNotAvailable(f"--ep {EP_NAME}: {exc}") from None

    def attach(self, session_options: Any) -> None:
        """Never called: the host builds the sessions (``holds_sessions``)."""
        raise TypeError(f"--ep {EP_NAME} builds its sessions in the DirectML host, not in this process")

    def device(self) -> None:
        """ONNX Runtime's device list of this process knows nothing of the host's device."""
        return None

    def found(self) -> None:
        """No line of its own: the preflight's next check starts the host (``preflight``)."""
        return None

    def identity(self, ort: dict[str, str]) -> dict[str, Any]:
        """The host's device record (``identity_record``; the host's ONNX Runtime, not ``ort``)."""
        return self.identity_record()

    def preflight(self, result: Any, read: Callable[[], dict[str, Any]]) -> bool:
        """The EP's own checks: the host starts and names its device, DirectML and ONNX Runtime
        (``read()``, the run header's record), and the canary (outputs known and non-zero) comes
        back exact; a host that computes wrong results (stock vkd3d 1.6: zeros with a successful
        Run) is fatal, naming the fix."""
        try:
            result.gpu = read()
        except SessionError as exc:
            return result.add("fatal", f"the DirectML host did not start: {first_line(exc.cause)}")
        emulation = result.gpu.get("emulation") or {}
        result.add("ok", f"DirectML host: {result.gpu.get('summary')}")
        result.add("warn", f"emulated device: Wine {emulation.get('wine')}, vkd3d {emulation.get('vkd3d')}, Mesa "
                           f"{emulation.get('mesa')} (lavapipe); results are DirectML's and the DirectML EP's own "
                           "algorithms, not hardware numerics; float16 nodes are declined on this device")
        canary = self.check_canary()
        return result.add("ok" if canary.ok else "fatal", canary.message)

    def describe(self) -> dict[str, Any]:
        """How the EP is held: the host program, the wheel its DLLs came from, the device path."""
        self.prepare()
        versions = dict((self._setup or {}).get("versions") or {})
        return {"holder": EP_NAME, "host_exe": (self._setup or {}).get("host_exe"),
                "distribution": "onnxruntime-directml", "version": versions.get("onnxruntime_directml_wheel"),
                "dml_device": self.spec.options.get("dml_device", "shared")}

    def package(self) -> tuple[str, str]:
        """``(distribution, version)`` the EP comes from: the onnxruntime-directml wheel whose DLLs
        the host loads (expectations scoped by package or ONNX Runtime version read this)."""
        self.prepare()
        versions = (self._setup or {}).get("versions") or {}
        return "onnxruntime-directml", str(versions.get("onnxruntime_directml_wheel") or versions.get("onnxruntime"))

    # -- sessions ------------------------------------------------------------------------------
    def run_session(self, model: onnx.ModelProto, feeds: Mapping[str, np.ndarray], settings: SessionSettings, *,
                    allow_fallback: bool = False, profile: bool = True, quiet: bool = False,
                    initializers: Mapping[str, np.ndarray] | None = None) -> EpRun:
        """Build ``model``'s session in the host with the conformance settings, run it once on
        ``feeds`` and read back the outputs and (when ``profile``) where each node ran; raises
        ``SessionError`` as the in-process session layer does, plus ``crash`` and ``timeout``."""
        if initializers:
            raise SessionError("build", PROVIDER, RuntimeError(
                f"the DirectML host takes a model with its weights inside it; this one has {len(initializers)} "
                "external initializers (a model over 2 GiB cannot be sent to the host)"))
        run = self._request(model.SerializeToString(), feeds, settings, allow_fallback, profile, quiet)
        if run.error_stage is not None:
            error = SessionError("run" if run.error_stage == "run" else "build", PROVIDER,
                                 RuntimeError(run.error_message or f"{run.error_stage} failed"))
            error.emulation = run.emulation_notes
            raise error
        stale = stale_partition(model, run.assignment) if settings.dml_graph_fusion else 0
        if stale:
            error = SessionError("run", PROVIDER, RuntimeError(
                f"graph fusion is on and a fused DirectML partition has {stale} nodes"))
            error.emulation = [f"ORT's DML EP re-executes a fused partition of {stale} nodes (>= "
                               f"{REUSED_COMMAND_LIST_NODES}) from a command list recorded before its inputs and "
                               "outputs are bound (descriptors volatile); vkd3d on lavapipe (no descriptor "
                               "update-after-bind) reads descriptor tables when the list is recorded, so the "
                               "outputs are never written; run without --dml-graph-fusion to test these nodes"]
            raise error
        result = EpRun(list(run.outputs), list(run.output_names))
        if profile:
            names = [n.name for n in model.graph.node]
            placement, evidence = placement_mod.placement_evidence(run.profile_events, names, run.assignment)
            result.placement = {n: placement[n] for n in names if n in placement}
            result.evidence, result.placement_note = evidence, run.profile_note
            result.placement_source = placement_mod.describe_evidence(evidence, run.profile_note)
        # as the host timed them: its DirectML device (when made per session) and the session's build,
        # then the run and the read-back
        result.build_s = run.options_seconds + run.build_seconds
        result.run_s = run.run_seconds + run.finish_seconds
        return result

    def _request(self, model_bytes: bytes, feeds: Mapping[str, np.ndarray], settings: SessionSettings,
                 allow_fallback: bool, profile: bool, quiet: bool) -> HostRun:
        """One request to this process's host (started, or restarted after a crash, on demand)."""
        host = self.host()
        # a session of several packed cases carries the fault of any of them (a pack that fails is
        # taken apart down to the case alone, which then gets it)
        fault = next(filter(None, (planted_fault(case_id) for case_id in current_cases())), None)
        try:
            if fault == "abort":
                host._test_abort()
            elif fault == "hang":
                host._test_stall(HANG_MS)
            return host.run(model_bytes, dict(feeds), provider="DML",
                            device_id=int(self.spec.options.get("device_id", 0)),
                            shared_device=self.spec.options.get("dml_device", "shared") == "shared",
                            graph_opt=settings.graph_opt,
                            config_entries=config_entries(self.spec, settings, allow_fallback=allow_fallback),
                            profile=profile, log_severity=4 if quiet else 3)
        except HostCrashed as exc:
            self._drop()
            raise SessionError("crash", PROVIDER, RuntimeError(f"the DirectML host (wine64 host.exe) died: {exc}")
                               ) from None
        except HostTimeout as exc:
            self._drop()
            raise SessionError("timeout", PROVIDER, RuntimeError(f"the DirectML host hung: {exc}")) from None

    def host(self) -> DmlWineHost:
        """This process's host, started on first use (about 1-2 s)."""
        self.prepare()
        if self._host is None or not self._host.alive:
            self._drop()
            try:
                self._host = DmlWineHost(request_timeout=REQUEST_TIMEOUT)
            except HostError as exc:
                hint = "" if isinstance(exc, HostNoDevice) or SETUP_COMMAND in str(exc) else \
                    f" (set up with `{SETUP_COMMAND}`)"
                raise SessionError("build", PROVIDER, RuntimeError(f"the DirectML host did not start: {exc}{hint}")) \
                    from None
            self._hello = self._host.info
        return self._host

    def _drop(self) -> None:
        """Close the host (if any); the next request starts a new one."""
        host, self._host = self._host, None
        if host is not None:
            try:
                host.close(timeout=5)
            except HostError:
                pass

    def close(self) -> None:
        """End this process's host (the pool's workers end with theirs)."""
        self._drop()

    # -- identity and the canary ---------------------------------------------------------------
    def hosted_devices(self) -> list[dict[str, Any]]:
        """The adapters the Wine host's DXGI lists (``ep-testbed devices --ep dml-wine``: this
        process's ONNX Runtime cannot see them): index, description, PCI ids, whether DXGI calls
        it a software adapter, memory, whether ``--ep-option device_id`` chooses it, and that the
        device is emulated (vkd3d on Mesa's lavapipe)."""
        hello = self.host().info
        chosen = int(self.spec.options.get("device_id", 0))
        return [{"index": a.get("index"), "description": a.get("description"),
                 "vendor_id": f"0x{int(a.get('vendor_id', 0)):04X}", "device_id": f"0x{int(a.get('device_id', 0)):04X}",
                 "software": bool(a.get("software")), "dedicated_video_memory": a.get("dedicated_video_memory"),
                 "chosen": a.get("index") == chosen, "emulated": True}
                for a in hello.get("adapters") or []]

    def hosted_words(self, adapters: list[dict[str, Any]]) -> list[str]:
        """``ep-testbed devices``' lines for ``hosted_devices``: the host's adapters, each marked as
        the emulated device it is."""
        lines = [f"{safe(self.spec.provider)} under Wine (--ep {EP_NAME}): its Wine host's DXGI lists {len(adapters)} "
                 "adapter(s), which this process's ONNX Runtime cannot see (--ep-option device_id=N picks one):"]
        for a in adapters:
            memory = a.get("dedicated_video_memory")
            size = f", {int(memory) // 2**20} MiB" if isinstance(memory, int) and memory > 0 else ""
            lines.append(f"  {safe(a.get('index'))}: {safe(a.get('description'))} [{safe(str(a.get('vendor_id'))[2:])}:"
                         f"{safe(str(a.get('device_id'))[2:])}]{size}, an emulated Direct3D 12 device (vkd3d on Mesa's "
                         "lavapipe): not a hardware result" + ("  <- device_id chooses this" if a.get("chosen") else ""))
        return lines

    def identity_record(self) -> dict[str, Any]:
        """The run header's device record: the emulated adapter as the host's DXGI sees it,
        DirectML.dll's and ONNX Runtime's versions, Wine's, vkd3d's and the Direct3D 12 limits;
        ``emulated`` so merge and diff never mix it with a hardware DirectML run. Read from the
        last host's hello when this process had one (the preflight's), else from a host started now."""
        hello = self._hello if self._hello is not None else self.host().info
        versions = (self._setup or {}).get("versions") or {}
        adapters = hello.get("adapters") or []
        chosen = next((a for a in adapters if a.get("index") == int(self.spec.options.get("device_id", 0))), None)
        adapter = None if chosen is None else {
            "description": chosen.get("description"), "vendor_id": f"0x{int(chosen.get('vendor_id', 0)):04X}",
            "device_id": f"0x{int(chosen.get('device_id', 0)):04X}", "software": bool(chosen.get("software")),
            "dedicated_video_memory": chosen.get("dedicated_video_memory")}
        d3d12 = hello.get("d3d12") or {}
        return {"source": EP_NAME, "emulated": True, "adapter": adapter,
                "directml": {"version": (hello.get("directml_dll") or {}).get("file_version")},
                "onnxruntime": {"distribution": "onnxruntime-directml", "version": hello.get("onnxruntime_version")},
                "emulation": {"wine": versions.get("wine") or hello.get("wine_version"),
                              "vkd3d": versions.get("vkd3d"), "mesa": versions.get("mesa_vulkan_drivers"),
                              "feature_level": d3d12.get("feature_level"), "shader_model": d3d12.get("shader_model"),
                              "vkd3d_workaround": d3d12.get("meta_commands_workaround")},
                "ort_device": {"device": None, "selection": None, "candidates": [],
                               "note": "the host's DXGI names the device; this process's ONNX Runtime cannot see it"},
                "note": "an emulated Direct3D 12 device (vkd3d on Mesa's lavapipe, under Wine): results are "
                        "DirectML's and the DirectML EP's own algorithms, never hardware numerics"}

    def check_canary(self) -> canary.CanaryResult:
        """The canary on this process's host, on the device path the run uses."""
        versions = (self._setup or {}).get("versions") or {}
        return canary.check(self.host(), f"{versions.get('vkd3d', '?')} (the set-up's native DLLs)",
                            shared_device=self.spec.options.get("dml_device", "shared") == "shared")


def spec(options: Mapping[str, str] | None = None) -> EpSpec:
    """The ``EpSpec`` of ``--ep dml-wine``: DirectML's provider name and the ``dml`` alias (so
    ``harness/expectations/dml.json`` applies: it is the same EP), held by this adapter."""
    return EpSpec(PROVIDER, "dml", dict(options or {}), holder=EP_NAME)


__all__ = ["EP_NAME", "FAULT_ENV", "OPTIONS", "PROVIDER", "WineDmlAdapter", "planted_fault", "spec"]
