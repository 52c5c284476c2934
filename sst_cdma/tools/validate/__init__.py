"""``sst-cdma validate``: one call that measures an NVIDIA GPU and puts the simulator beside it
(docs/validate.md).

One module per measurement -- :mod:`.layers` and :mod:`.kernels` (per-layer and per-kernel
times), :mod:`.bandwidth` (device memory), :mod:`.copies` (pinned host copies),
:mod:`.training` (a training step with and without activation offload, per-layer timeline),
:mod:`.cpu_adam` (the host CPU's Adam) -- on the device and clock of :mod:`.device`, sized by
:mod:`.plan`; :mod:`.files` and :mod:`.provenance` write what was measured and on what,
:mod:`.compare` simulates the same configurations and tabulates both, :mod:`.cli` is the
command. Every module but :mod:`.plan` imports PyTorch.
"""
