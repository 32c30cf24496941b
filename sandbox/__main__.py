import sys

from sandbox.worker import main

sys.exit(main(sys.argv[1:]))
