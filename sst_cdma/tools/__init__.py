"""The tools: the command-line programs, sweeps, the regression suite and the capture of
real networks' activations and states. Nothing below imports them."""
