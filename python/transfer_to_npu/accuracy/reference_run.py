"""The reference run of a compare whose reference the machine chooses
(``--reference auto``): ``python -m transfer_to_npu.accuracy.reference_run
DIR script.py args`` (or ``DIR -m module args``), started with
``TRANSFER_TO_NPU=0``.  torch is imported here, where the run needs it,
so that the compare itself never imports it to choose: with a GPU the
script runs as it is, unmigrated, dumped to DIR (every process it starts
too); without one, on the host through the cpu backend.
"""

import os
import sys


def main(argv):
    directory, target = argv[0], argv[1:]
    import torch

    from .. import __main__ as runner

    if not torch.cuda.is_available():
        return runner.main(["--backend", "cpu", "--dump", directory] + target)
    os.environ["TRANSFER_TO_NPU_DUMP"] = directory
    from . import dump

    dump.start()
    if target[0] == "-m":
        return runner.run_target(target[1], None, target[2:])
    return runner.run_target(None, target[0], target[1:])


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
