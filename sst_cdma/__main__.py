"""``python -m sst_cdma``: the ``sst-cdma`` command."""
import sys

from sst_cdma.tools.cli.sst_cdma_main import run_main

sys.exit(run_main())
