"""``python -m sst_cdma.tools.parallel_study``: :func:`~sst_cdma.tools.parallel_study.main`."""
import sys

from sst_cdma.tools.parallel_study import main

sys.exit(main())
