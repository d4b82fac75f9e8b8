"""``python -m labcore.data.upload PENDING_FOLDER``: the subprocess :func:`~labcore.data.upload.save_job.start_save`
starts to check and save an upload."""

import sys

from labcore.data.upload.save_job import main

if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
