"""``workloads.render``: a rendered stream's text is laid out once and given again while it is
among the last few asked for, each stream keeping its own."""
from __future__ import annotations

import workloads.render as render
from workloads.render import iteration_stream, render_stream, stream_text


def test_a_rendered_streams_text_is_laid_out_once_and_each_stream_keeps_its_own():
    assert render.TEXTS_KEPT >= 2
    render._TEXTS.clear()
    streams = [iteration_stream("alexnet", 8, "float32", policy)
               for policy in ("all", "conv", "all")]
    assert streams[2] is streams[0]
    texts = [stream_text(s) for s in streams]
    assert texts[0] is texts[2]                       # the second time: the text kept
    assert texts[0] != texts[1]                       # another stream: its own text
    render._TEXTS.clear()
    assert stream_text(streams[1]) == texts[1] == render_stream("alexnet", 8, "float32",
                                                                policy="conv")
    for n in range(render.TEXTS_KEPT + 2):            # never more than TEXTS_KEPT kept
        stream_text(iteration_stream("alexnet", 8 + n, "float32", "all"))
    assert len(render._TEXTS) == render.TEXTS_KEPT
    assert stream_text(streams[1]) is not texts[1]    # dropped since: laid out again
    assert stream_text(streams[1]) == texts[1]


def test_a_parsed_streams_text_is_made_each_time():
    from workloads.stream import parse_stream

    parsed = parse_stream(stream_text(iteration_stream("alexnet", 8, "float32", "conv")),
                          "alexnet.stream")
    render._TEXTS.clear()
    assert stream_text(parsed) == stream_text(parsed) and not render._TEXTS
