"""The simulated pipeline: GPUs running cdma.PipelineStageWorkload stages wired by
cdma.PipelinePorts. With identical layers the bubble comes out of the simulation equal to the
reference executor (workloads.parallel.makespan) and to the closed forms (Narayanan et al., SC
2021: (m + p - 1) stage-times for GPipe and 1F1B, m + (p - 1)/v for interleaved 1F1B) to the
picosecond, with free links and with real ones; each stage holds at most the micro-batches
``in_flight`` says; bad layouts and bad wiring are refused in one line."""
from __future__ import annotations

import pytest

from sst_cdma.engine.errors import RunError
from workloads.parallel import ModelShape, in_flight, make_layout, makespan, stage_orders

#: each layer's forward and backward kernel time (ps): odd, so that no rounding hides
FORWARD_PS, BACKWARD_PS = 1_003, 2_011
#: layers of each virtual stage
PER_CHUNK = 2


def pipeline_script(pp: int, m: int, schedule: str, vpp: int = 1, bandwidth: str = "0B/s",
                    latency: str = "0ps", stages: tuple[int, ...] = (), ring: bool = False,
                    ports_of: tuple[str, str] = ("next", "prev"),
                    times: tuple[int, int] = (FORWARD_PS, BACKWARD_PS)) -> str:
    """A topology of ``pp`` GPUs, each a stage of a chain of identical layers with its own
    HBM, stage s's ``next`` port wired to stage s + 1's ``prev`` (round the ring when
    interleaved); ``stages`` overrides the stage each GPU's ports say they are."""
    stages = stages or tuple(range(pp))
    return f"""
import sst
ports = []
for s in range({pp}):
    gpu = sst.Component(f"gpu{{s}}", "cdma.GPU")
    work = gpu.setSubComponent("workload", "cdma.PipelineStageWorkload")
    work.addParams({{"pp": {pp}, "stage": s, "micro_batches": {m}, "schedule": "{schedule}",
                    "vpp": {vpp}, "layers": {PER_CHUNK * pp * vpp},
                    "forward_time": "{times[0]}ps", "backward_time": "{times[1]}ps",
                    "activation": "1MB"}})
    p2p = gpu.setSubComponent("p2p", "cdma.PipelinePorts")
    p2p.addParams({{"stage": {list(stages)}[s], "bandwidth": "{bandwidth}",
                   "latency": "{latency}"}})
    hbm = sst.Component(f"hbm{{s}}", "cdma.HBM")
    hbm.addParams({{"bandwidth": "732GB/s", "capacity": "16GiB"}})
    sst.Link(f"l_hbm{{s}}", "0ps").connect((gpu, "hbm"), (hbm, "gpu"))
    ports.append(p2p)
for s in range({pp} if {vpp > 1 or ring} else {pp - 1}):
    sst.Link(f"l_pipe{{s}}", "0ps").connect((ports[s], "{ports_of[0]}"),
                                            (ports[(s + 1) % {pp}], "{ports_of[1]}"))
"""


def layout_of(pp: int, m: int, schedule: str, vpp: int = 1):
    """The layout the script's stages run."""
    shape = ModelShape(layers=PER_CHUNK * pp * vpp, heads=1, kv_heads=1, hidden=1, ffn=1,
                       vocab=1)
    return make_layout(shape, pp=pp, vpp=vpp, schedule=schedule, micro_batches=m)


def stage_results(result, pp: int):
    """Each stage's (GPU result, stage result, ports result), in stage order."""
    return [(result.results[f"gpu{s}"], result.results[f"gpu{s}:workload[0]"],
             result.results[f"gpu{s}:p2p[0]"]) for s in range(pp)]


CASES = [("gpipe", 2, 1, 1), ("gpipe", 3, 4, 1), ("gpipe", 4, 8, 1),
         ("1f1b", 2, 3, 1), ("1f1b", 4, 8, 1), ("1f1b", 4, 2, 1),
         ("interleaved", 2, 4, 2), ("interleaved", 3, 6, 2), ("interleaved", 2, 2, 3),
         ("interleaved", 4, 8, 2)]


@pytest.mark.parametrize("schedule, p, m, v", CASES)
def test_free_links_give_the_closed_form_step_to_the_picosecond(run_script, schedule, p, m, v):
    result, _ = run_script(pipeline_script(p, m, schedule, v))
    stages = stage_results(result, p)
    chunk_f, chunk_b = PER_CHUNK * FORWARD_PS, PER_CHUNK * BACKWARD_PS
    step = max(gpu.iteration_time_ps for gpu, _, _ in stages)
    # the stage-time (one micro-batch's forward and backward on one stage) is v chunks'
    closed = (m * v + p - 1) * (chunk_f + chunk_b)   # (m + p - 1) T, or (m + (p - 1)/v) T
    reference = makespan(stage_orders(layout_of(p, m, schedule, v)), chunk_f, chunk_b)
    assert step == reference.step_time == closed
    for s, (gpu, stage, ports) in enumerate(stages):
        assert gpu.completed
        assert stage.end_ps == gpu.iteration_time_ps == reference.timeline[s][-1][2]
        assert stage.busy_ps == gpu.compute_time_ps == reference.busy[s]
        # the bubble is time the stream waited in a recv for its peer's message
        assert ports.recv_wait_ps == gpu.iteration_time_ps - gpu.compute_time_ps
        # a micro-batch starts once, at its first chunk's forward, however many chunks
        assert gpu.model_states.get("micro_batches", 1) == m


@pytest.mark.parametrize("schedule, p, m, v", CASES)
def test_each_stage_holds_the_micro_batches_in_flight_the_schedule_says(run_script, schedule,
                                                                      p, m, v):
    result, _ = run_script(pipeline_script(p, m, schedule, v))
    expected = in_flight(stage_orders(layout_of(p, m, schedule, v)))
    assert tuple(stage.in_flight for _, stage, _ in stage_results(result, p)) == expected
    if schedule == "1f1b":
        assert expected == tuple(min(p - s, m) for s in range(p))


#: 1 MB at 1000 GB/s leaves in 1 us, and lands 1 us later
LINK_PS = 1_000_000 + 1_000_000
#: layer times (ps) under which a stage's forward (two layers) outlasts a message's 1 us on
#: the link: the link never queues, as the reference executor assumes
SLOW = (1_000_003, 2_000_011)


def real_link_step(run_script, p: int, m: int, schedule: str, v: int = 1,
                   times: tuple[int, int] = SLOW) -> tuple[int, list]:
    """The simulated step over 1000 GB/s links of 1 us latency, and the stages' results."""
    result, _ = run_script(pipeline_script(p, m, schedule, v, bandwidth="1000GB/s",
                                           latency="1us", times=times))
    stages = stage_results(result, p)
    return max(gpu.iteration_time_ps for gpu, _, _ in stages), stages


@pytest.mark.parametrize("p, m", [(2, 1), (3, 4), (4, 8)])
def test_a_real_link_adds_what_the_reference_executor_says_for_gpipe(run_script, p, m):
    step, stages = real_link_step(run_script, p, m, "gpipe")
    chunk_f, chunk_b = PER_CHUNK * SLOW[0], PER_CHUNK * SLOW[1]
    reference = makespan(stage_orders(layout_of(p, m, "gpipe")), chunk_f, chunk_b, LINK_PS)
    assert step == reference.step_time == \
        (m + p - 1) * (chunk_f + chunk_b) + 2 * (p - 1) * LINK_PS
    # every activation forward and every gradient back crossed a link: 1 MB each
    for s, (_, _, ports) in enumerate(stages):
        neighbours = (s > 0) + (s < p - 1)
        assert ports.sent_bytes == ports.received_bytes == neighbours * m * 1_000_000


@pytest.mark.parametrize("schedule, p, m, v", [("1f1b", 4, 8, 1), ("interleaved", 2, 4, 2)])
def test_a_real_link_matches_the_reference_executor_for_the_other_schedules(run_script,
                                                                           schedule, p, m, v):
    step, _ = real_link_step(run_script, p, m, schedule, v)
    reference = makespan(stage_orders(layout_of(p, m, schedule, v)), PER_CHUNK * SLOW[0],
                         PER_CHUNK * SLOW[1], LINK_PS)
    assert step == reference.step_time
    assert step > (m * v + p - 1) * PER_CHUNK * (SLOW[0] + SLOW[1])


def test_a_link_slower_than_the_stages_queues_the_messages(run_script):
    # each stage's forward takes 2 ns and each message 1 us on the link: the activations of
    # the 8 micro-batches leave stage 0 one after another, which no fixed send time models
    step, _ = real_link_step(run_script, 2, 8, "gpipe", times=(FORWARD_PS, BACKWARD_PS))
    reference = makespan(stage_orders(layout_of(2, 8, "gpipe")), PER_CHUNK * FORWARD_PS,
                         PER_CHUNK * BACKWARD_PS, LINK_PS)
    assert step > reference.step_time
    assert step >= 8 * 1_000_000 + 1_000_000   # 8 messages leave in turn, the last lands


@pytest.mark.parametrize("params, message", [
    (dict(pp=2, m=4, schedule="interleaved"),
     "schedule 'interleaved' needs vpp >= 2 model chunks per stage, but vpp is 1"),
    (dict(pp=2, m=3, schedule="interleaved", vpp=2),
     "schedule 'interleaved' needs micro_batches a multiple of pp 2, but micro_batches is 3"),
    (dict(pp=2, m=4, schedule="1f1b", vpp=2),
     "vpp 2 needs schedule 'interleaved', but schedule is '1f1b'"),
])
def test_a_bad_layout_is_refused_in_one_line(run_script, params, message):
    with pytest.raises(RunError) as info:
        run_script(pipeline_script(params["pp"], params["m"], params["schedule"],
                                   params.get("vpp", 1), ring=True))
    assert message in str(info.value)
    assert "\n" not in str(info.value)


@pytest.mark.parametrize("kwargs, message", [
    (dict(stages=(0, 2)), "gpu0:p2p[0]: send x2.m0 names peer=1, but port 'next' leads to stage 2"),
    (dict(ports_of=("next", "next")), "port 'next' is wired to port 'next' of stage"),
])
def test_bad_wiring_is_refused_in_one_line(run_script, kwargs, message):
    with pytest.raises(RunError) as info:
        run_script(pipeline_script(2, 2, "1f1b", **kwargs))
    assert message in str(info.value)
    assert "\n" not in str(info.value)


def test_a_send_without_pipeline_ports_is_refused(run_script):
    script = pipeline_script(2, 1, "gpipe").replace(
        'p2p = gpu.setSubComponent("p2p", "cdma.PipelinePorts")', 'p2p = gpu')
    script = script.replace('p2p.addParams', 'dict').replace(
        'for s in range(2 if False else 1):', 'for s in range(0):')
    with pytest.raises(RunError, match="needs the GPU's p2p slot filled with "
                                          "cdma.PipelinePorts"):
        run_script(script)
