"""Errors below the command line name params; under a command line, the flags that set them."""
from __future__ import annotations

import pytest

from sst_cdma.builder.model_options import ELEMENT_OPTIONS, flag_words
from sst_cdma.engine.param_words import Flag, param_word, speak_flags, speak_params


@pytest.fixture(autouse=True)
def _params_again():
    yield
    speak_params()


def test_a_param_is_named_by_itself_without_a_command_line():
    speak_params()
    assert param_word("cdma.NetworkWorkload", "optimizer_states") == "optimizer_states"
    assert param_word("cdma.NetworkWorkload", "optimizer_states", "nvme") == \
        "optimizer_states=nvme"
    assert param_word("cdma.GPU", "hbm_contention", False) == "hbm_contention=false"


def test_under_a_command_line_the_flag_is_named_with_its_value():
    speak_flags(flag_words())
    assert param_word("cdma.NetworkWorkload", "optimizer_states", "nvme") == \
        "--optimizer-states nvme"
    assert param_word("cdma.NetworkWorkload", "batch") == "--batch"
    # a param no option sets keeps its own name
    assert param_word("cdma.NetworkWorkload", "write_stream", True) == "write_stream=true"


def test_an_inverted_flag_names_the_form_that_gives_the_value():
    speak_flags({("cdma.GPU", "hbm_contention"): Flag("--no-contention", invert=True)})
    assert param_word("cdma.GPU", "hbm_contention", False) == "--no-contention"
    assert param_word("cdma.GPU", "hbm_contention", True) == "--contention"
    speak_flags({("cdma.GPU", "data_parallel"): Flag("--data-parallel")})
    assert param_word("cdma.GPU", "data_parallel", True) == "--data-parallel"
    assert param_word("cdma.GPU", "data_parallel", False) == "--no-data-parallel"


def test_the_vocabulary_is_the_model_options_table():
    words = flag_words()
    for opt in ELEMENT_OPTIONS:
        if opt.declaration is None:
            assert words[(opt.element, opt.param)].flag == opt.flag


def test_a_topology_build_speaks_in_flags_and_the_next_script_in_params(tmp_path):
    import io

    import sst_cdma

    script = tmp_path / "bare.py"
    script.write_text("import sst\n")
    sst_cdma.run("topologies/pascal_cdma.py", ["--network", "alexnet", "--batch", "1",
                                               "--no-baselines"],
                 stop_at="1us", console=io.StringIO())
    assert param_word("cdma.NetworkWorkload", "batch") == "--batch"
    sst_cdma.run(str(script), console=io.StringIO())
    assert param_word("cdma.NetworkWorkload", "batch") == "batch"


def test_a_param_override_is_named_as_the_param_it_set():
    from sst_cdma.engine.param_words import forget_flag

    speak_flags(flag_words())
    assert param_word("cdma.CDMAEngine", "buffer", "32KiB") == "--buffer 32KiB"
    forget_flag("cdma.CDMAEngine", "buffer")
    assert param_word("cdma.CDMAEngine", "buffer", "32KiB") == "buffer=32KiB"
    assert param_word("cdma.CDMAEngine", "burst") == "--burst"
