"""``python -m tether``: the ``tether`` command, for environments without the script on PATH."""

import sys

from tether._cli.main import main

sys.exit(main())
