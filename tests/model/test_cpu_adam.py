"""The CPU Adam file: what ``sst-cdma time-cpu-adam`` writes loads back as the same figures,
the shipped default is such a file, and a file of another format, version or with a missing
field or bad number is refused in one line naming the file."""
from __future__ import annotations

import copy
import json

import pytest

from sst_cdma.model.cpu_adam import (DEFAULT_CPU_ADAM, FORMAT, CpuAdamError, CpuAdamProfile,
                                     check_cpu_adam, headline, load_cpu_adam)


def _measurement(implementation, params, threads, median):
    return {"implementation": implementation, "params": params, "tensors": 4,
            "threads": threads, "seconds": [median, median * 1.1, median * 1.2],
            "median_s": median * 1.1, "min_s": median, "params_per_s": params / median}


def _doc():
    measurements = [_measurement("foreach", 1000, 1, 1e-4), _measurement("foreach", 4000, 1, 2e-4),
                    _measurement("foreach", 4000, 2, 1e-4), _measurement("for-loop", 4000, 1, 4e-4),
                    _measurement("for-loop", 4000, 2, 3e-4)]
    doc = {"format": FORMAT, "version": 1,
           "machine": {"cpu": "Test CPU", "cores": 2, "architecture": "x86_64",
                       "memory_bytes": 1 << 30, "os": "Linux", "load_average": 0.1},
           "date": "2026-12-02T13:00:00Z", "software": {"torch": "2.13.0"},
           "command": "sst-cdma time-cpu-adam --output x.json",
           "step": {"optimizer": "torch.optim.AdamW", "master_dtype": "float32",
                    "moments_dtype": "float32", "gradient_dtype": "float32",
                    "weight_copy_dtype": "bfloat16", "bytes_per_param_read": 16,
                    "bytes_per_param_written": 14},
           "measurements": measurements, "unavailable": {"fused": "not built"}}
    doc.update(headline(measurements, 2))
    return doc


def _write(tmp_path, doc, name="adam.json"):
    path = tmp_path / name
    path.write_text(json.dumps(doc))
    return path


def test_a_file_loads_as_its_headline_figures(tmp_path):
    profile = load_cpu_adam(_write(tmp_path, _doc()))
    assert isinstance(profile, CpuAdamProfile)
    assert profile.implementation == "foreach" and profile.size_params == 4000
    assert profile.implementation_all_cores == "foreach"
    assert profile.params_per_s_per_core == pytest.approx(4000 / 2e-4)
    assert profile.params_per_s_all_cores == pytest.approx(4000 / 1e-4)
    assert profile.cores_measured == 2 and profile.torch == "2.13.0"
    assert profile.bytes_per_param_read == 16 and profile.bytes_per_param_written == 14
    assert profile.bytes_per_param == 30
    assert profile.machine == "Test CPU, 2 cores, x86_64"
    assert profile.date == "2026-12-02T13:00:00Z"


def test_the_step_time_follows_the_measured_rates(tmp_path):
    profile = load_cpu_adam(_write(tmp_path, _doc()))
    assert profile.step_seconds(20_000, 1) == pytest.approx(20_000 * 2e-4 / 4000)
    assert profile.step_seconds(20_000, 8) == pytest.approx(20_000 * 1e-4 / 4000)
    with pytest.raises(ValueError):
        profile.step_seconds(10, 0)


def test_the_headline_is_the_fastest_per_thread_count_at_the_largest_size():
    doc = _doc()
    assert doc["best_implementation"] == "foreach"  # 20 M/s against for-loop's 10 M/s
    assert doc["size_params"] == 4000  # not the 1000-parameter one, though it is faster
    doc["measurements"][4] = _measurement("for-loop", 4000, 2, 5e-5)  # for-loop scales better
    figures = headline(doc["measurements"], 2)
    assert figures["best_implementation"] == "foreach"
    assert figures["best_implementation_all_cores"] == "for-loop"
    assert figures["params_per_s"] == pytest.approx(4000 / 5e-5)


def test_a_host_steps_with_deepspeeds_rates_where_the_file_measured_them(tmp_path):
    doc = _doc()
    slower = [_measurement("deepspeed", 4000, 1, 3e-4), _measurement("deepspeed", 4000, 2, 2e-4)]
    doc["measurements"] += slower
    doc.update(headline(doc["measurements"], 2))
    assert doc["best_implementation"] == "foreach"  # the fastest measured stays the headline
    profile = load_cpu_adam(_write(tmp_path, doc))
    assert profile.implementation == profile.implementation_all_cores == "deepspeed"
    assert profile.params_per_s_per_core == pytest.approx(4000 / 3e-4)
    assert profile.params_per_s_all_cores == pytest.approx(4000 / 2e-4)


def test_deepspeed_measured_on_one_thread_only_leaves_the_fastest(tmp_path):
    doc = _doc()
    doc["measurements"].append(_measurement("deepspeed", 4000, 1, 3e-4))
    doc.update(headline(doc["measurements"], 2))
    assert load_cpu_adam(_write(tmp_path, doc)).implementation == "foreach"


def test_the_shipped_default_loads():
    profile = load_cpu_adam()
    assert profile.source == str(DEFAULT_CPU_ADAM)
    assert profile.params_per_s_per_core > 0 and profile.cores_measured >= 1
    doc = json.loads(DEFAULT_CPU_ADAM.read_text())
    assert doc["command"].startswith("sst-cdma time-cpu-adam")


def _broken(change):
    doc = _doc()
    change(doc)
    return doc


BAD = {
    "another format": (lambda d: d.update(format="sst-cdma-kernel-params"),
                       "format: 'sst-cdma-kernel-params' is not 'sst-cdma-cpu-adam'"),
    "another version": (lambda d: d.update(version=2), "version: 2 is not 1"),
    "missing headline": (lambda d: d.pop("params_per_s_per_core"),
                         "missing field 'params_per_s_per_core'"),
    "unknown field": (lambda d: d.update(speed=1), "unknown field 'speed'"),
    "missing machine cpu": (lambda d: d["machine"].pop("cpu"), "machine: missing field 'cpu'"),
    "negative bytes": (lambda d: d["step"].update(bytes_per_param_read=-1),
                       "step.bytes_per_param_read: -1 is not a positive finite number"),
    "boolean threads": (lambda d: d["measurements"][0].update(threads=True),
                        "measurements[0].threads: True is not a positive whole number"),
    "nan time": (lambda d: d["measurements"][1]["seconds"].append(float("nan")),
                 "measurements[1].seconds[3]: nan is not a positive finite number"),
    "inconsistent rate": (lambda d: d["measurements"][2].update(params_per_s=123456789.0),
                          "measurements[2].params_per_s: 123456789.0 is not params / min_s"),
    "min not the fastest": (lambda d: d["measurements"][2].update(min_s=1.0),
                            "measurements[2].min_s: 1.0 is not the fastest of seconds"),
    "headline not measured": (lambda d: d.update(params_per_s_per_core=1e9),
                              "params_per_s_per_core: 1000000000.0 is not what the "
                              "measurements give"),
    "unknown implementation": (lambda d: d["measurements"][0].update(implementation="avx"),
                               "measurements[0].implementation: 'avx' is not one of"),
    "no all-core run": (lambda d: d.update(cores_measured=4),
                        "none on 4 threads (cores_measured)"),
    "unknown simd flag": (lambda d: d["machine"].update(simd=["avx512f", "mmx"]),
                          "machine.simd: ['avx512f', 'mmx'] is not a list of avx512f"),
    "clock in kHz": (lambda d: d["machine"].update(cpu_mhz=2.6e6),
                     "machine.cpu_mhz: 2600000.0 is more than 10000"),
    "zero clock": (lambda d: d["machine"].update(cpu_mhz=0),
                   "machine.cpu_mhz: 0 is not a positive finite number"),
    "optimizer of no implementation": (lambda d: d.update(optimizers={"avx": "x"}),
                                       "optimizers: 'avx' is not one of"),
    "empty optimizer": (lambda d: d.update(optimizers={"deepspeed": ""}),
                        "optimizers.deepspeed: '' is not a non-empty string"),
}


def test_the_recorded_cpu_and_optimizer_reach_the_profile(tmp_path):
    doc = _doc()
    doc["machine"].update(simd=["avx512f", "avx2"], cpu_mhz=2600.0)
    doc["optimizers"] = {"foreach": "torch.optim.AdamW(foreach=True)",
                         "deepspeed": "deepspeed.ops.adam.DeepSpeedCPUAdam(adamw_mode=True)"}
    profile = load_cpu_adam(_write(tmp_path, doc))
    assert (profile.simd, profile.simd_bits, profile.cpu_mhz) == (("avx512f", "avx2"), 512,
                                                                 2600.0)
    assert profile.implementation == "foreach"
    assert profile.optimizer == "torch.optim.AdamW(foreach=True)"
    # a file without them (the shipped one) has none
    shipped = load_cpu_adam()
    assert (shipped.simd, shipped.simd_bits, shipped.cpu_mhz, shipped.optimizer) == \
        ((), 0, 0.0, "")


@pytest.mark.parametrize("case", sorted(BAD))
def test_a_bad_file_is_one_line_naming_the_file(tmp_path, case):
    change, message = BAD[case]
    path = _write(tmp_path, _broken(change))
    with pytest.raises(CpuAdamError) as info:
        load_cpu_adam(path)
    text = str(info.value)
    assert text.startswith(f"{path}: ") and message in text and "\n" not in text


def test_unreadable_and_non_json_files_name_the_file(tmp_path):
    with pytest.raises(CpuAdamError, match="missing.json: cannot read"):
        load_cpu_adam(tmp_path / "missing.json")
    path = tmp_path / "bad.json"
    path.write_text("{not json")
    with pytest.raises(CpuAdamError, match="bad.json: not a JSON file"):
        load_cpu_adam(path)
    path.write_text("[1, 2]")
    with pytest.raises(CpuAdamError, match="bad.json: expected a JSON object, got list"):
        load_cpu_adam(path)


def test_the_check_leaves_a_good_document_alone():
    doc = _doc()
    before = copy.deepcopy(doc)
    check_cpu_adam(doc)
    assert doc == before
