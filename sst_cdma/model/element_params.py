"""The elements whose params the model and the workloads name in their errors, and how they name
one: :func:`sst_cdma.engine.param_words.param_word` of the element's type, so a topology
script that set ``optimizer_states`` reads ``optimizer_states=nvme`` and ``sst`` reads the
flag its user typed. Each type is the ``type_name()`` of its element in ``components/``
(tests/core/test_param_words.py checks that they agree)."""
from __future__ import annotations

from sst_cdma.engine.param_words import NO_VALUE, param_word

__all__ = ["NETWORK_WORKLOAD", "FITTED_KERNELS", "network_word", "fitted_word"]

#: the workload rendering a network: its params place the model states and pick the policy,
#: the attention form and the optimizer
NETWORK_WORKLOAD = "cdma.NetworkWorkload"
#: the kernels slot's fitted model: its params pick the TF32 mode
FITTED_KERNELS = "cdma.FittedKernels"


def network_word(param: str, value: object = NO_VALUE) -> str:
    """How an error names ``param`` of the network workload (with ``value`` when given)."""
    return param_word(NETWORK_WORKLOAD, param, value)


def fitted_word(param: str, value: object = NO_VALUE) -> str:
    """How an error names ``param`` of the fitted kernel model (with ``value`` when given)."""
    return param_word(FITTED_KERNELS, param, value)
