"""``cdma.NetworkWorkload``: a GPU's workload rendered from a network definition for a batch,
element type, memory policy (or per-tensor plan, or the planner's) and optimizer, its kernels
priced through the GPU's ``kernels`` slot; the rendered stream is written into the output
directory as ``<gpu>.stream``."""
from __future__ import annotations

from typing import TYPE_CHECKING, Any, Mapping, Optional

from sst_cdma.engine.config import ConfigError
from sst_cdma.engine.element import MAX_EXACT_COUNT, MAX_EXACT_COUNT_WHY, Param
from sst_cdma.model.attention import ATTENTION_FORMS
from sst_cdma.model.dtypes import DTYPES
from sst_cdma.model.kernel_model import ModelError
from workloads import WorkloadError, load_network
from workloads.layer_times import kernel_times_source
from workloads.model_states import GRADIENT_PLACES, PLACES, STATE_COMPRESSION, Placement
from workloads.policies import check_policy, load_plan_file
from workloads.render import iteration_stream, plan_auto, stream_text
from workloads.stream import Stream, StreamError

from .interfaces import HostStep, TransferCosts
from .model_states import ModelStates
from .workload_source import WorkloadSource

if TYPE_CHECKING:  # the state planner is loaded where model states may move
    from workloads.state_planner import StateCosts

__all__ = ["NetworkWorkload", "MAX_GRAD_ACCUM"]

#: the most micro-batches an optimizer step may accumulate: each is simulated in turn
#: (``pascal_cdma.py --network alexnet --no-baselines --grad-accum 4096`` took 6.3 s and
#: 280 MiB on a 2-core machine), so a network of hundreds of layers already takes minutes
MAX_GRAD_ACCUM = 4096
MAX_GRAD_ACCUM_WHY = ("each micro-batch is simulated in turn: 4,096 of AlexNet's take seconds, "
                      "of a large network minutes, and a billion would run for weeks")


class NetworkWorkload(WorkloadSource):
    """One training iteration of a network, rendered for the GPU's memory (vDNN semantics)."""

    PARAMS = (
        Param("network", "str", None, "network to render the stream for: a shipped name or a "
              ".yaml network definition"),
        Param("batch", "int", 64, "batch size (a transformer's micro-batch)", minimum=1,
              maximum=MAX_EXACT_COUNT, why_maximum=f"a batch is {MAX_EXACT_COUNT_WHY}"),
        Param("seq_len", "int", 0, "sequence length of a transformer network (0: its "
              "definition's; a network with learned positions takes at most as many)",
              minimum=0, maximum=MAX_EXACT_COUNT,
              why_maximum=f"a sequence length is {MAX_EXACT_COUNT_WHY}"),
        Param("attention", "str", "", "attention form of a transformer network: naive "
              "(scores, softmax and context layers), flash2 or flash3 (FlashAttention-2/-3) or "
              "fused (the best the GPU runs); '': its definition's", choices=("", *ATTENTION_FORMS)),
        Param("dtype", "str", "float32", "element type", choices=tuple(DTYPES)),
        Param("policy", "str", "conv", "memory policy: a vDNN offload policy (none, all, conv), "
              "recompute, auto (the planner), plan (the 'plan' file) or CHOICE-GROUP terms "
              "joined by '+' (recompute-attn+offload-ffn; docs/workloads.md)",
              check=check_policy),
        Param("plan", "str", "", "per-tensor plan: a JSON file mapping activation tensors to "
              "keep, offload, compress or recompute (sets policy 'plan')"),
        Param("optimizer", "str", "none", "optimizer step ending the iteration (none: "
              "forward and backward only)", choices=("none", "sgd", "momentum", "adam")),
        Param("workspace", "bytes", "0B", "cuDNN workspace each convolution kernel gets under "
              "the roofline (allocated for the kernel's duration); the fitted model sizes "
              "each kernel's own workspace instead (its workspace_limit)", minimum=0),
        Param("allocation", "str", "liveness", "GPU memory allocation: liveness (a buffer from "
              "its birth to its death: vDNN's layer-wise memory manager) or network-wide "
              "(vDNN's baseline: every buffer for the whole iteration where the policy moves no "
              "tensor; liveness where it does)", choices=("liveness", "network-wide")),
        Param("write_stream", "bool", "true", "write the rendered stream into the output "
              "directory as <gpu>.stream"),
        Param("optimizer_states", "str", "gpu", "where the optimizer state (with mixed "
              "precision its fp32 master weights) lives: gpu, host (pinned host memory, the "
              "step on the host CPU on port 'cpu': ZeRO-Offload) or nvme (on the engine's SSDs, read "
              "into host memory around the CPU's step: ZeRO-Infinity)", choices=PLACES),
        Param("weights", "str", "gpu", "where the 16-bit weights live between their uses: "
              "gpu, host or nvme (each layer's prefetched from that tier for its use)", choices=PLACES),
        Param("gradients", "str", "gpu", "where the weight gradients live: gpu (the whole "
              "iteration) or host (on the GPU only until their bucket is copied)",
              choices=GRADIENT_PLACES),
        Param("delayed_update", "bool", "false", "ZeRO-Offload's one-step delayed parameter "
              "update: the host CPU's step of the previous iteration overlaps this one"),
        Param("grad_accum", "int", 1, "micro-batches per optimizer step, their gradients "
              "accumulated in place (gradients host: on the host)", minimum=1, maximum=MAX_GRAD_ACCUM,
              why_maximum=MAX_GRAD_ACCUM_WHY),
        Param("gradient_bucket", "bytes", "0B", "gradient bucket copied to the host CPU (0: "
              "DeepSpeed's reduce_bucket_size, 5e8 elements)", minimum=0),
        Param("plan_states", "str", "none", "policy auto: the tiers the planner may place the "
              "model states on besides the GPU: none (where the options put them), host (the "
              "host CPU on port 'cpu' steps them: ZeRO-Offload) or nvme (host, and the engine's "
              "SSDs: ZeRO-Infinity)", choices=("none", "host", "nvme")),
        Param("state_compression", "str", "none", "who compresses the gradient copies to the "
              "host CPU and the weight copies back: none, engine (the cDMA engine's codec at "
              "both ends of the link) or host (the engine's codec at the GPU, the host CPU's "
              "at the host; docs/workloads.md)", choices=STATE_COMPRESSION),
    )

    @classmethod
    def plans_states(cls, params: Mapping[str, Any]) -> bool:
        """True when, with ``params`` (this element's, validated), policy auto's planner
        places the model states itself: Adam, whose host-CPU step it prices, and tiers besides
        the GPU to place them on (``plan_states``)."""
        return params["policy"] == "auto" and params["optimizer"] == "adam" and \
            params["plan_states"] != "none"

    @classmethod
    def needs_host_cpu(cls, params: Mapping[str, Any]) -> bool:
        """True when the host CPU steps the model states (the optimizer states live off the
        GPU) or the planner may have it do so (:meth:`plans_states`)."""
        return params["optimizer_states"] != "gpu" or cls.plans_states(params)

    def __init__(self, simulation: Any, name: str, params: Any) -> None:
        super().__init__(simulation, name, params)
        self.optimizer = self.params["optimizer"]
        self.allocation = self.params["allocation"]
        p = self.params
        self.placement = Placement(p["optimizer_states"], p["weights"], p["gradients"],
                                   p["delayed_update"], p["grad_accum"], p["gradient_bucket"],
                                   p["state_compression"])
        if p["plan_states"] == "none":  # the options' placement is the one the run renders:
            try:                        # refused when the graph is built, before any run
                self.placement.check(self.optimizer)
            except WorkloadError as exc:
                raise ConfigError(f"{self.name}: {exc}") from None

    @property
    def modelled_times(self) -> bool:
        """True when the kernels slot's fitted model priced the stream's kernels."""
        return self.kernels.models_times

    def kernel_times_source(self) -> str:
        """The kernels slot's model or measurement, for this GPU's preset and element type."""
        kernels = self.kernels
        try:
            model = kernels.model
            return kernel_times_source(kernels.model_name, self.owner.params["gpu_preset"],
                                       kernels.layer_times, self.params["dtype"],
                                       model.tf32 if model is not None else "",
                                       self._fused_attention(),
                                       model.stack if model is not None else "fused")
        except (ModelError, WorkloadError) as exc:
            raise ConfigError(f"{self.name}: {exc}") from None

    def _fused_attention(self) -> str:
        """The fused attention kernel the network asks for ('': none, a CNN or naive)."""
        p = self.params
        net = load_network(p["network"], p["seq_len"], p["attention"])
        kinds = [dict(layer.params).get("kernel", "fused") for layer in net.layers
                 if layer.kind == "flash_attention"]
        return kinds[0] if kinds else ""

    def stream(self, memory_capacity: Optional[int]) -> Stream:
        """Render the iteration with algorithms chosen for ``memory_capacity`` bytes of GPU
        memory (None: unlimited), and write it into the output directory."""
        p = self.params
        kernels = self.kernels
        try:
            policy, choices = self._choices(memory_capacity)
            stream = iteration_stream(p["network"], p["batch"], p["dtype"], policy,
                                      kernels.layer_times, p["optimizer"], p["workspace"],
                                      p["allocation"], kernels.model, kernels.workspace_limit,
                                      memory_capacity, choices, seq_len=p["seq_len"],
                                      attention=p["attention"],
                                      placement=None if self.placement.default
                                      else self.placement)
        except ConfigError:
            raise
        except OSError as exc:
            raise ConfigError(f"{self.name}: cannot read workload: {exc}") from None
        except (StreamError, WorkloadError, ValueError) as exc:
            raise ConfigError(f"{self.name}: {exc}") from None
        if stream.plan is not None:
            # what the schedule did: network-wide holds buffers only where nothing moves
            self.allocation = stream.plan.allocation
        out = self.simulation.output_directory
        if out is not None and p["write_stream"]:
            (out / f"{self.owner.name}.stream").write_text(stream_text(stream),
                                                             encoding="utf-8")
        return stream

    def _choices(self, memory_capacity: Optional[int]) -> tuple[str, Any]:
        """The policy to render and its per-tensor choices (``((tensor, choice), ...)``, None
        for the vDNN and term policies): a plan file's, or the planner's for ``auto``."""
        p = self.params
        if p["plan"]:
            if p["policy"] not in ("conv", "plan"):
                raise ConfigError(f"{self.name}: 'plan' sets the policy; it contradicts policy "
                                  f"{p['policy']!r}")
            net = load_network(p["network"], p["seq_len"], p["attention"])
            chosen = load_plan_file(p["plan"], net, p["batch"], p["dtype"])
            return "plan", tuple(sorted(chosen.items()))
        if p["policy"] == "plan":
            raise ConfigError(f"{self.name}: policy 'plan' needs a 'plan' file")
        if p["policy"] != "auto":
            return p["policy"], None
        if p["allocation"] != "liveness":
            raise ConfigError(f"{self.name}: policy auto plans liveness allocation, not "
                              f"{p['allocation']!r}")
        if memory_capacity is None:  # unlimited memory: everything stays
            return "auto", ()
        return "auto", tuple(sorted(self._auto_plan(memory_capacity).items()))

    def _auto_plan(self, capacity: int) -> dict[str, str]:
        """Run the planner for the GPU's memory, its kernels slot and its engine."""
        p = self.params
        kernels = self.kernels
        kernel_ps = self.planner_kernel_ps()
        costs = self.planner_copy_costs(load_network(p["network"], p["seq_len"],
                                                     p["attention"]), p["batch"], p["dtype"])

        def plan(placement: Optional[Placement]) -> Any:
            return plan_auto(p["network"], p["batch"], p["dtype"], capacity, kernel_ps, costs,
                             kernels.layer_times, p["optimizer"], p["workspace"], kernels.model,
                             kernels.workspace_limit, label="policy auto",
                             seq_len=p["seq_len"], attention=p["attention"],
                             placement=placement, transfer_ps=self._weights_ps())

        options = self._placements()
        if len(options) > 1:
            from workloads.state_planner import choose_placement  # only where states move

            self.placement, result, verdicts = choose_placement(options, plan,
                                                                self._state_costs())
        else:
            result = plan(None if self.placement.default else self.placement)
            verdicts = []
        self.planner = {"predicted_time_s": result.predicted_time_ps * 1e-12,
                        "model_peak_bytes": result.model_peak_bytes,
                        "rendered_peak_bytes": result.rendered_peak_bytes,
                        "rounds": result.rounds}
        if verdicts:
            self.planner["model_states"] = [v.as_dict() for v in verdicts]
        return result.choices

    def _placements(self) -> list[Placement]:
        """The model-state placements policy auto weighs: the options' alone, unless
        ``plan_states`` lets it choose and a host CPU (:meth:`_host_cpu`) can step the
        states."""
        p = self.params
        if not self.plans_states(p) or self._host_cpu() is None or \
                "dma" not in self.owner.connected_ports():
            return [self.placement]
        from workloads.state_planner import candidates  # only where states may move

        return candidates(self.placement, True, p["plan_states"] == "nvme")

    def _host_cpu(self) -> Optional[HostStep]:
        """The host CPU that would step model states kept on the host: the one on port
        'cpu' of the driver in the GPU's ``model_states`` slot (None: no driver, or no CPU
        on its port)."""
        states = self.owner.subcomponent("model_states")
        return states.host_cpu() if isinstance(states, ModelStates) else None

    def _engine(self) -> Any:
        return self.owner.peer_provider("dma", TransferCosts)

    def _weights_ps(self) -> Any:
        """Prices a prefetch of weights off the GPU (from the host or the SSDs) as the engine
        moves it, for the planner; None without an engine."""
        if "dma" not in self.owner.connected_ports():
            return None
        engine = self._engine()
        priced: dict[tuple[str, int, str], int] = {}

        def ps(op: Any, nbytes: int) -> int:
            key = (op.op, nbytes, "gpu-nvme" if op.tier == "nvme" else "gpu-host")
            if key not in priced:  # the planner asks of every plan alike: each priced once
                priced[key] = engine.state_copy_ps(*key)
            return priced[key]
        return ps

    def _state_costs(self) -> StateCosts:
        """The engine's and the host CPU's prices of the model-state traffic, for the
        planner."""
        from workloads.state_planner import StateCosts

        engine = self._engine()
        cpu = self._host_cpu()
        assert cpu is not None, "the placements weighed need a host CPU"

        kernels = self.kernels
        dram_bw = self.hbm_bandwidth()

        def storage(direction: str, nbytes: int) -> int:
            return engine.state_copy_ps(direction, nbytes, "host-nvme")

        def add(bucket: Any) -> int:  # as the GPU prices it (GPU.elementwise)
            return kernels.kernel_ps(None, bucket.params, 3 * bucket.grad_bytes, dram_bw)
        return StateCosts(lambda direction, nbytes: engine.state_copy_ps(direction, nbytes),
                          lambda bucket: cpu.step_alone_ps(bucket.params,
                                                           bucket.step_dram_bytes),
                          cpu.host_room(),
                          storage if self.params["plan_states"] == "nvme" else None, add)

