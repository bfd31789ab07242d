import sys

from gpufleet.cli.main import main

sys.exit(main())
