"""Idle connections' cost (scripts/bench-scale.sh): opens COUNT connections
to a broker, each sends one ApiVersions request and reads its answer (a
client that connected and then went quiet), then holds them open for
SECONDS while the broker's CPU (utime+stime of PID) is sampled; prints
the CPU seconds the broker spent over that time and its resident memory
at the end.

Usage: idle_connections.py HOST:PORT PID COUNT SECONDS
"""
import os
import resource
import socket
import struct
import sys
import time


def api_versions(correlation_id):
    client = b"idle"
    header = struct.pack(">hhih", 18, 0, correlation_id, len(client)) + client
    return struct.pack(">i", len(header)) + header


def read_frame(sock):
    size = b""
    while len(size) < 4:
        chunk = sock.recv(4 - len(size))
        if not chunk:
            raise ConnectionError("closed before an answer")
        size += chunk
    left = struct.unpack(">i", size)[0]
    while left > 0:
        chunk = sock.recv(min(left, 65536))
        if not chunk:
            raise ConnectionError("closed mid-answer")
        left -= len(chunk)


def cpu_seconds(pid):
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def rss_mib(pid):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) // 1024
    return 0


def main():
    host, port = sys.argv[1].rsplit(":", 1)
    pid, count, seconds = int(sys.argv[2]), int(sys.argv[3]), float(sys.argv[4])
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (min(hard, count + 64), hard))
    connections = []
    for i in range(count):
        sock = socket.create_connection((host, int(port)), timeout=10)
        sock.sendall(api_versions(i))
        read_frame(sock)
        connections.append(sock)
    before = cpu_seconds(pid)
    time.sleep(seconds)
    spent = cpu_seconds(pid) - before
    rss = rss_mib(pid)
    alive = 0
    for sock in connections:
        sock.setblocking(False)
        try:
            alive += sock.recv(1) != b""
        except BlockingIOError:
            alive += 1  # nothing to read: still open
        sock.close()
    print(f"{count} idle connections ({alive} still open) for {seconds:.0f} s: "
          f"broker CPU {spent:.3f} s, RSS {rss} MiB")


if __name__ == "__main__":
    main()
