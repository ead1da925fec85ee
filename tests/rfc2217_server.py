"""pyserial's own RFC 2217 server, ``serial.rfc2217.PortManager``, around a serial port: the
second RFC 2217 server the tests run (after ser2net), in a process of its own, as
pyserial's ``examples/rfc2217_server.py`` runs it.

    python tests/rfc2217_server.py --device PATH --port N

It prints ``listening N`` once it accepts connections. One client at a time: a new client
replaces the old one (ser2net's ``kickolduser``). The port is opened for each client and
closed after it, so a device behind a symlink that was replaced (a simulator restarted,
a USB adapter replugged) is found again. A pty has no modem lines: setting DTR or RTS on
it fails (``ENOTTY``), which a real port's server would not meet, so the port ignores that
(and reads the modem lines as off). SIGTERM stops it.

The script imports only pyserial and the standard library: it stands for software no one
here wrote.
"""

from __future__ import annotations

import argparse
import contextlib
import errno
import signal
import socket
import sys
import threading
from types import FrameType

import serial
import serial.rfc2217


class PortWithoutModemLines(serial.Serial):
    """A serial port whose missing modem lines (a pty's) are not an error."""

    def _update_dtr_state(self) -> None:
        try:
            super()._update_dtr_state()  # type: ignore[misc]
        except OSError as exc:
            if exc.errno != errno.ENOTTY:
                raise

    def _update_rts_state(self) -> None:
        try:
            super()._update_rts_state()  # type: ignore[misc]
        except OSError as exc:
            if exc.errno != errno.ENOTTY:
                raise

    @property
    def cts(self) -> bool:
        return False

    @property
    def dsr(self) -> bool:
        return False

    @property
    def ri(self) -> bool:
        return False

    @property
    def cd(self) -> bool:
        return False


class Connection:
    """The client's socket as PortManager writes to it (``write``), from two threads."""

    def __init__(self, sock: socket.socket) -> None:
        self.sock = sock
        self._lock = threading.Lock()

    def write(self, data: bytes) -> None:
        with self._lock:
            self.sock.sendall(data)


def serve_client(sock: socket.socket, device: str) -> None:
    """Relay between the client and the port until either side ends."""
    connection = Connection(sock)
    try:
        port = PortWithoutModemLines(device, baudrate=115200, timeout=0.05)
    except serial.SerialException as exc:
        print(f"cannot open {device}: {exc}", file=sys.stderr, flush=True)
        sock.close()
        return
    # typeshed's stub asks for rfc2217.Serial twice; PortManager takes any pyserial port,
    # and for the connection any object with write().
    manager = serial.rfc2217.PortManager(port, connection)  # type: ignore[arg-type]
    done = threading.Event()

    def port_to_network() -> None:
        while not done.is_set():
            try:
                data = port.read(4096)
                if data:
                    connection.write(b"".join(manager.escape(data)))
            except (OSError, serial.SerialException):
                break
        done.set()

    reader = threading.Thread(target=port_to_network, daemon=True)
    reader.start()
    try:
        while not done.is_set():
            data = sock.recv(4096)
            if not data:
                break
            port.write(b"".join(manager.filter(data)))
    except (OSError, serial.SerialException):
        pass
    finally:
        done.set()
        reader.join()
        port.close()
        sock.close()


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--device", required=True)
    parser.add_argument("--port", type=int, default=0)
    args = parser.parse_args()
    server = socket.create_server(("127.0.0.1", args.port))

    def stop(_signum: int, _frame: FrameType | None) -> None:
        raise SystemExit(0)

    signal.signal(signal.SIGTERM, stop)
    print(f"listening {server.getsockname()[1]}", flush=True)
    current: tuple[socket.socket, threading.Thread] | None = None
    while True:
        connection, _ = server.accept()
        connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        if current is not None:  # a new client replaces the old one
            old, thread = current
            with contextlib.suppress(OSError):
                old.shutdown(socket.SHUT_RDWR)
            thread.join()
        thread = threading.Thread(target=serve_client, args=(connection, args.device))
        thread.start()
        current = (connection, thread)


if __name__ == "__main__":
    sys.exit(main())
