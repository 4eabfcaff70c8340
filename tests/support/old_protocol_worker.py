"""Test-only worker entry that speaks an older protocol version, to test the handshake check."""

import sys

from neurok_blender.bridge import protocol
from neurok_blender.runtime import worker

if __name__ == "__main__":
    protocol.PROTOCOL_VERSION = 0
    sys.exit(worker.main(sys.argv[1:]))
