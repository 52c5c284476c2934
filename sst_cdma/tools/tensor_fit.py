"""``python -m sst_cdma.tools.tensor_fit``: refit the tensor-core path of the kernel model on
the shipped measurements, rewrite ``sst_cdma/model/tensor_core_params.json``
(:func:`sst_cdma.model.tensor_fit.write_tensor_params`) and print the fit errors."""
from __future__ import annotations

import argparse
import json
from typing import Optional, Sequence

from sst_cdma.model.tensor_fit import write_tensor_params

__all__ = ["main"]


def main(argv: Optional[Sequence[str]] = None) -> None:
    """Refit the tensor-core path, rewrite ``tensor_core_params.json`` and print the fit
    errors."""
    argparse.ArgumentParser(prog="python -m sst_cdma.tools.tensor_fit",
                            description=main.__doc__).parse_args(argv)
    print(json.dumps(write_tensor_params()["fit_error"], indent=1))


if __name__ == "__main__":
    main()
