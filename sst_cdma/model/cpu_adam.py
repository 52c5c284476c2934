"""The host CPU's Adam throughput, as ``sst-cdma time-cpu-adam`` measured it: the file format,
its checks and the typed profile a host-CPU model reads (``docs/host_cpu.md``).

File format (version 1)::

    {"format": "sst-cdma-cpu-adam", "version": 1,
     "machine": {"cpu": "AMD EPYC", "cores": 2, "architecture": "x86_64",
                 "memory_bytes": 25217208320, "os": "Linux-6.1...", "load_average": 0.4},
     "date": "2026-12-02T13:10:00Z",
     "software": {"torch": "2.13.0+cpu", "python": "3.11.7", "sst-cdma": "0.1.0"},
     "command": "sst-cdma time-cpu-adam --output host.json",
     "step": {"optimizer": "torch.optim.AdamW", "master_dtype": "float32",
              "moments_dtype": "float32", "gradient_dtype": "float32",
              "weight_copy_dtype": "bfloat16",
              "bytes_per_param_read": 16, "bytes_per_param_written": 14},
     "measurements": [{"implementation": "foreach", "params": 16777216, "tensors": 16,
                       "threads": 1, "seconds": [0.21, ...], "median_s": 0.22,
                       "min_s": 0.21, "params_per_s": 79891296.0}, ...],
     "unavailable": {"fused": "why this PyTorch cannot run it"},
     "best_implementation": "foreach", "best_implementation_all_cores": "for-loop",
     "size_params": 16777216,
     "params_per_s_per_core": 79891296.0, "params_per_s": 121000000.0,
     "cores_measured": 2}

A measurement's ``params_per_s`` is ``params / min_s``, the fastest timed step: on a shared
machine others' work only ever slows a step down. The headline figures are at the largest size
measured: ``params_per_s_per_core`` is the fastest implementation's on one thread
(``best_implementation``), ``params_per_s`` the fastest on ``cores_measured`` threads
(``best_implementation_all_cores``).
"""
from __future__ import annotations

import math
from pathlib import Path
from typing import Any, Mapping, Union

from sst_cdma.engine.file_reads import MIB, FileKind, FileReadError, load_json
from sst_cdma.engine.records import FrozenRecord, frozen_record

__all__ = ["FORMAT", "VERSION", "DEFAULT_CPU_ADAM", "IMPLEMENTATIONS", "TORCH_IMPLEMENTATIONS",
           "SIMD_BITS", "CpuAdamError",
           "CpuAdamProfile", "load_cpu_adam", "check_cpu_adam", "headline", "stepped_rates",
           "ZERO_OFFLOAD_IMPLEMENTATION", "MIN_PARAMS_PER_S",
           "MAX_CORES", "MAX_PARAMS", "adam_rate_fault", "step_traffic_floor"]

FORMAT = "sst-cdma-cpu-adam"
VERSION = 1
#: the shipped measurement (made on the machine and date ``docs/host_cpu.md`` names)
DEFAULT_CPU_ADAM = Path(__file__).with_name("cpu_adam_default.json")
#: a CPU-Adam file: a few dozen measurements (the shipped one is 7 KiB)
CPU_ADAM_FILE = FileKind("a CPU-Adam file", 1 * MIB)
#: PyTorch's CPU Adam implementations, fastest expected first: ``fused`` (one kernel over each
#: tensor), ``foreach`` (multi-tensor ops), ``for-loop`` (one tensor at a time)
TORCH_IMPLEMENTATIONS: tuple[str, ...] = ("fused", "foreach", "for-loop")
#: every implementation timed: PyTorch's, and ``deepspeed``, DeepSpeed's ``DeepSpeedCPUAdam``
#: (its ``cpu_adam`` op: AVX-512/AVX2 over OpenMP threads), what ZeRO-Offload runs
IMPLEMENTATIONS: tuple[str, ...] = TORCH_IMPLEMENTATIONS + ("deepspeed",)
#: the implementation a host's ZeRO-Offload step runs, and so the one a host steps with where
#: a file measured it (``stepped_rates``)
ZERO_OFFLOAD_IMPLEMENTATION = "deepspeed"
#: the CPU's vector extensions a file records (``machine.simd``, from ``/proc/cpuinfo``'s
#: flags), widest first, and the vector bits each gives an fp32 multiply-add: AVX-512 512,
#: AVX2 256, Arm's SVE and Advanced SIMD (NEON) 128 (SVE's width is the core's: Neoverse V2's
#: is 128)
SIMD_BITS: dict[str, int] = {"avx512f": 512, "avx2": 256, "sve": 128, "asimd": 128}
#: the slowest Adam a host CPU may run, in parameters per second on one core: a fortieth of
#: the slowest measurement shipped (3.7e7 on one core of an AMD EPYC, the smallest size), and
#: at it a 13-billion-parameter step on one core already takes 3.6 hours of simulated time
MIN_PARAMS_PER_S = 1e6
MIN_PARAMS_PER_S_WHY = ("no CPU of a GPU host is slower, the slowest measurement shipped "
                        "being 3.7e7 on one core, and at 1e6 a 13-billion-parameter step on "
                        "one core already takes 3.6 hours")
#: the most cores (threads) a measurement or a host CPU may have: CONFIG_NR_CPUS of a Linux
#: x86-64 kernel built with MAXSMP, the most that kernel schedules on
MAX_CORES = 8192
MAX_CORES_WHY = "the most CPUs a Linux x86-64 kernel can be built for: NR_CPUS with MAXSMP"
#: the fastest clock a file may record: no CPU core runs above 10 GHz (the fastest shipped
#: parts boost to about 6), so a larger figure is a unit slip (kHz, Hz)
MAX_MHZ = 10_000.0
MAX_MHZ_WHY = "no CPU core runs at 10 GHz: a larger figure is a unit slip"
#: the most parameters a measurement may have stepped: a count exact in float64
MAX_PARAMS = 2 ** 53

_TOP = ("format", "version", "machine", "date", "software", "command", "step", "measurements",
        "best_implementation", "best_implementation_all_cores", "size_params", "params_per_s_per_core", "params_per_s",
        "cores_measured")
_OPTIONAL_TOP = ("unavailable", "optimizers")
_MACHINE = ("cpu", "cores", "architecture", "memory_bytes", "os", "load_average")
#: recorded since DeepSpeed's CPU Adam was timed: the CPU's vector extensions and its clock
_OPTIONAL_MACHINE = ("simd", "cpu_mhz")
_STEP = ("optimizer", "master_dtype", "moments_dtype", "gradient_dtype", "weight_copy_dtype",
         "bytes_per_param_read", "bytes_per_param_written")
_MEASUREMENT = ("implementation", "params", "tensors", "threads", "seconds", "median_s",
                "min_s", "params_per_s")


class CpuAdamError(ValueError):
    """A CPU Adam file that cannot be used; the message is one line naming the file."""


@frozen_record
class CpuAdamProfile(FrozenRecord):
    """What a host-CPU model needs of one CPU Adam measurement.

    ``params_per_s_per_core`` parameters updated per second on one thread by ``implementation``
    and ``params_per_s_all_cores`` on ``cores_measured`` threads by
    ``implementation_all_cores`` (DeepSpeed's where the file measured it, else the fastest
    there: :func:`stepped_rates`), at ``size_params`` parameters; per parameter updated the
    step reads
    ``bytes_per_param_read`` and writes ``bytes_per_param_written`` bytes of host memory (fp32
    master, moments and gradient read, fp32 master and moments and the 16-bit weight copy
    written). ``machine`` describes the CPU in one line (``cpu`` its model name), ``date`` is when it
    was measured and ``source`` the file.
    """

    params_per_s_per_core: float
    params_per_s_all_cores: float
    cores_measured: int
    implementation: str
    implementation_all_cores: str
    size_params: int
    bytes_per_param_read: float
    bytes_per_param_written: float
    machine: str
    date: str
    torch: str
    source: str
    #: the measuring CPU's model name (the file's ``machine.cpu``)
    cpu: str = ""
    #: the measuring CPU's vector extensions (``machine.simd``; () where the file predates
    #: them) and its clock in MHz (``machine.cpu_mhz``; 0 where not recorded)
    simd: tuple[str, ...] = ()
    cpu_mhz: float = 0.0
    #: what ``implementation`` ran (the file's ``optimizers``; "" where not recorded)
    optimizer: str = ""

    @property
    def simd_bits(self) -> int:
        """The widest fp32 vector of the measuring CPU's recorded extensions (0: none
        recorded)."""
        return max((SIMD_BITS[flag] for flag in self.simd), default=0)

    @property
    def shipped(self) -> bool:
        """True when this is the shipped measurement (:data:`DEFAULT_CPU_ADAM`), whose
        machine ``docs/host_cpu.md`` describes beyond what the file records."""
        return Path(self.source).resolve() == DEFAULT_CPU_ADAM.resolve()

    @property
    def bytes_per_param(self) -> float:
        """Host memory bytes the step moves per parameter, read and written together."""
        return self.bytes_per_param_read + self.bytes_per_param_written

    def step_seconds(self, params: int, cores: int = 1) -> float:
        """Seconds an Adam step over ``params`` parameters takes on ``cores`` cores as measured:
        the one-thread rate at 1, the all-core rate at ``cores_measured`` or more, linear in
        between (a model that shares memory bandwidth should do its own sum)."""
        if params < 0 or cores < 1:
            raise ValueError(f"params {params} and cores {cores}: need params >= 0, cores >= 1")
        if cores >= self.cores_measured or self.cores_measured == 1:
            rate = self.params_per_s_all_cores
        else:
            share = (cores - 1) / (self.cores_measured - 1)
            rate = self.params_per_s_per_core + share * (self.params_per_s_all_cores
                                                         - self.params_per_s_per_core)
        return params / rate


def step_traffic_floor() -> float:
    """The least host DRAM bandwidth (B/s) a host CPU's step may have: the slowest Adam a
    host may run (:data:`MIN_PARAMS_PER_S` on one core) at the shipped measurement's bytes a
    parameter (read and written: 16 + 14)."""
    return MIN_PARAMS_PER_S * load_cpu_adam(DEFAULT_CPU_ADAM).bytes_per_param


def adam_rate_fault(rate: float) -> str:
    """Why ``rate`` (parameters per second on one core) cannot be a CPU's Adam ("" when it
    can)."""
    if rate >= MIN_PARAMS_PER_S:
        return ""
    return (f"slower than {MIN_PARAMS_PER_S:g} parameters/s per core: "
            f"{MIN_PARAMS_PER_S_WHY}")


def _number(where: str, value: Any, *, integer: bool = False, most: float = math.inf,
            why: str = "") -> float:
    ok = isinstance(value, int) if integer else isinstance(value, (int, float))
    if isinstance(value, bool) or not ok or not math.isfinite(value) or value <= 0:
        kind = "positive whole number" if integer else "positive finite number"
        raise CpuAdamError(f"{where}: {value!r} is not a {kind}")
    if value > most:
        shown = str(most) if isinstance(most, int) else f"{most:g}"
        raise CpuAdamError(f"{where}: {value!r} is more than {shown} ({why})")
    return value


def _rate(where: str, value: Any) -> float:
    """A measured rate in parameters per second: positive, finite, and no slower than
    :data:`MIN_PARAMS_PER_S`."""
    rate = _number(where, value)
    fault = adam_rate_fault(rate)
    if fault:
        raise CpuAdamError(f"{where}: {fault}")
    return rate


def _fields(where: str, value: Any, required: tuple[str, ...],
            optional: tuple[str, ...] = ()) -> Mapping[str, Any]:
    if not isinstance(value, dict):
        raise CpuAdamError(f"{where}: expected an object, got {type(value).__name__}")
    for key in required:
        if key not in value:
            raise CpuAdamError(f"{where}: missing field {key!r}")
    extra = sorted(set(value) - set(required) - set(optional))
    if extra:
        raise CpuAdamError(f"{where}: unknown field {extra[0]!r}")
    return value


def _text(where: str, value: Any) -> str:
    if not isinstance(value, str) or not value:
        raise CpuAdamError(f"{where}: {value!r} is not a non-empty string")
    return value


def _check_measurement(where: str, item: Any) -> None:
    _fields(where, item, _MEASUREMENT)
    if item["implementation"] not in IMPLEMENTATIONS:
        raise CpuAdamError(f"{where}.implementation: {item['implementation']!r} is not one of "
                           f"{', '.join(IMPLEMENTATIONS)}")
    _number(f"{where}.params", item["params"], integer=True, most=MAX_PARAMS,
            why="a count exact in float64")
    _number(f"{where}.tensors", item["tensors"], integer=True, most=item["params"],
            why="the params, split into tensors of at least one")
    _number(f"{where}.threads", item["threads"], integer=True, most=MAX_CORES,
            why=MAX_CORES_WHY)
    if not isinstance(item["seconds"], list) or not item["seconds"]:
        raise CpuAdamError(f"{where}.seconds: expected a non-empty list of times")
    for i, seconds in enumerate(item["seconds"]):
        _number(f"{where}.seconds[{i}]", seconds)
    _number(f"{where}.median_s", item["median_s"])
    fastest = _number(f"{where}.min_s", item["min_s"])
    if not math.isclose(fastest, min(item["seconds"]), rel_tol=1e-6):
        raise CpuAdamError(f"{where}.min_s: {fastest!r} is not the fastest of seconds "
                           f"({min(item['seconds'])!r})")
    rate = _rate(f"{where}.params_per_s", item["params_per_s"])
    if not math.isclose(rate, item["params"] / fastest, rel_tol=1e-6):
        raise CpuAdamError(f"{where}.params_per_s: {rate!r} is not params / min_s "
                           f"({item['params'] / fastest!r})")


def _check_recorded(doc: Mapping[str, Any]) -> None:
    """The optional records: ``machine.simd`` a list of :data:`SIMD_BITS`' names,
    ``machine.cpu_mhz`` a clock of at most :data:`MAX_MHZ`, ``optimizers`` one text per
    implementation measured."""
    machine = doc["machine"]
    simd = machine.get("simd", [])
    if not isinstance(simd, list) or any(flag not in SIMD_BITS for flag in simd):
        raise CpuAdamError(f"machine.simd: {simd!r} is not a list of {', '.join(SIMD_BITS)}")
    if "cpu_mhz" in machine:
        _number("machine.cpu_mhz", machine["cpu_mhz"], most=MAX_MHZ, why=MAX_MHZ_WHY)
    optimizers = doc.get("optimizers", {})
    if not isinstance(optimizers, dict):
        raise CpuAdamError(f"optimizers: expected an object, got {type(optimizers).__name__}")
    for name, text in optimizers.items():
        if name not in IMPLEMENTATIONS:
            raise CpuAdamError(f"optimizers: {name!r} is not one of {', '.join(IMPLEMENTATIONS)}")
        _text(f"optimizers.{name}", text)


def headline(measurements: list[Mapping[str, Any]], cores: int) -> dict[str, Any]:
    """The headline figures of a list of measurements, at the largest size measured: the
    implementation fastest on one thread and its rate, and the implementation fastest on
    ``cores`` threads and its rate (a host runs whichever is fastest for its thread count)."""
    size = max(m["params"] for m in measurements)

    def fastest(threads: int, what: str) -> Mapping[str, Any]:
        found = [m for m in measurements if m["params"] == size and m["threads"] == threads]
        if not found:
            raise CpuAdamError(f"measurements: none on {threads} threads ({what}) at the "
                               f"largest size, {size}")
        return max(found, key=lambda m: m["params_per_s"])

    single, every = fastest(1, "one core"), fastest(cores, "cores_measured")
    return {"best_implementation": single["implementation"],
            "best_implementation_all_cores": every["implementation"], "size_params": size,
            "params_per_s_per_core": single["params_per_s"],
            "params_per_s": every["params_per_s"], "cores_measured": cores}


def check_cpu_adam(doc: Any) -> None:
    """Raise :class:`CpuAdamError` (message without the file name) unless ``doc`` is a valid
    version-1 CPU Adam document whose headline figures are those of its measurements."""
    if not isinstance(doc, dict):
        raise CpuAdamError(f"expected a JSON object, got {type(doc).__name__}")
    if doc.get("format") != FORMAT:
        raise CpuAdamError(f"format: {doc.get('format')!r} is not {FORMAT!r} (not a CPU Adam "
                           f"file)")
    if doc.get("version") != VERSION:
        raise CpuAdamError(f"version: {doc.get('version')!r} is not {VERSION} (a file of "
                           f"another version of sst-cdma)")
    _fields("", doc, _TOP, _OPTIONAL_TOP)
    machine = _fields("machine", doc["machine"], _MACHINE, _OPTIONAL_MACHINE)
    _text("machine.cpu", machine["cpu"])
    _number("machine.cores", machine["cores"], integer=True, most=MAX_CORES, why=MAX_CORES_WHY)
    _check_recorded(doc)
    step = _fields("step", doc["step"], _STEP)
    for key in ("bytes_per_param_read", "bytes_per_param_written"):
        _number(f"step.{key}", step[key])
    _text("date", doc["date"])
    if not isinstance(doc["software"], dict):
        raise CpuAdamError(f"software: expected an object of version strings, got "
                           f"{type(doc['software']).__name__}")
    if not isinstance(doc["measurements"], list) or not doc["measurements"]:
        raise CpuAdamError("measurements: expected a non-empty list")
    for i, item in enumerate(doc["measurements"]):
        _check_measurement(f"measurements[{i}]", item)
    cores = int(_number("cores_measured", doc["cores_measured"], integer=True, most=MAX_CORES,
                        why=MAX_CORES_WHY))
    for key, value in headline(doc["measurements"], cores).items():
        if doc[key] != value:
            raise CpuAdamError(f"{key}: {doc[key]!r} is not what the measurements give "
                               f"({value!r})")


def stepped_rates(doc: Mapping[str, Any]) -> Mapping[str, Any]:
    """The headline figures a host steps with: those of :data:`ZERO_OFFLOAD_IMPLEMENTATION`
    (DeepSpeed's ``DeepSpeedCPUAdam``, what ZeRO-Offload runs) where ``doc`` measured it at
    its largest size on one thread and on ``cores_measured`` threads, else the file's headline
    (the fastest of what it measured). ``doc`` must have passed :func:`check_cpu_adam`."""
    size, cores = doc["size_params"], doc["cores_measured"]
    ours = [m for m in doc["measurements"]
            if m["implementation"] == ZERO_OFFLOAD_IMPLEMENTATION and m["params"] == size]
    if {m["threads"] for m in ours} >= {1, cores}:
        return headline(ours, cores)
    return doc


def _describe(machine: Mapping[str, Any]) -> str:
    return f"{machine['cpu']}, {machine['cores']} cores, {machine.get('architecture', '?')}"


def load_cpu_adam(path: Union[str, Path] = DEFAULT_CPU_ADAM) -> CpuAdamProfile:
    """Read and check a CPU Adam file (default: the shipped measurement); a file that cannot
    be read, of another format or version, with a missing field or a bad number is a
    :class:`CpuAdamError` whose one line starts with the file's name."""
    path = Path(path)
    try:
        doc = load_json(path, CPU_ADAM_FILE, finite=False)  # the check names a NaN's field
    except FileReadError as exc:
        what = "not a JSON file" if exc.parsing else "cannot read"
        raise CpuAdamError(f"{path}: {what}: {exc}") from None
    try:
        check_cpu_adam(doc)
    except CpuAdamError as exc:
        raise CpuAdamError(f"{path}: {str(exc).lstrip(': ')}") from None
    step, rates = doc["step"], stepped_rates(doc)
    return CpuAdamProfile(
        params_per_s_per_core=float(rates["params_per_s_per_core"]),
        params_per_s_all_cores=float(rates["params_per_s"]),
        cores_measured=int(rates["cores_measured"]), implementation=rates["best_implementation"],
        implementation_all_cores=rates["best_implementation_all_cores"],
        size_params=int(rates["size_params"]),
        bytes_per_param_read=float(step["bytes_per_param_read"]),
        bytes_per_param_written=float(step["bytes_per_param_written"]),
        machine=_describe(doc["machine"]), date=doc["date"],
        torch=str(doc["software"].get("torch", "")), source=str(path),
        cpu=doc["machine"]["cpu"], simd=tuple(doc["machine"].get("simd", ())),
        cpu_mhz=float(doc["machine"].get("cpu_mhz", 0.0)),
        optimizer=str(doc.get("optimizers", {}).get(rates["best_implementation"], "")))
