"""A test job that attacks the gateway that runs it, as its payload says: {"do": WHAT, ...}

fifo          replace EOPS_RESULT_PATH with a FIFO nobody writes to, then exit 0
link          replace it with a symlink to payload["target"] (/proc/self/environ, /dev/zero,
              a file outside the run dir), then exit 0
slow_result   write payload["bytes"] bytes of result in 64 KiB pieces, payload["pause"]
              seconds apart, then exit 0
daemon        start a daemon that leaves the job's session and group (fork, setsid, fork),
              write "pid sid pgid" of it to payload["pid_file"], exit 0 (after
                  payload["then_sleep"] seconds, default 0)
close_stdout  close stdout and stderr, then sleep payload["sleep"] seconds
flood         write to stdout without end (1 MiB every 0.05 s)
env           write the job's own environment as its result, with what it can read of the
              run dir's launch.json"""

import json
import os
import sys
import time


def main() -> int:
    with open(os.environ["EOPS_PAYLOAD_PATH"], "rb") as fh:
        payload = json.load(fh)
    result_path = os.environ["EOPS_RESULT_PATH"]
    do = payload["do"]
    print(f"hostile job: {do}", flush=True)
    if do == "fifo":
        os.mkfifo(result_path)
    elif do == "link":
        os.symlink(payload["target"], result_path)
    elif do == "slow_result":
        left = int(payload["bytes"])
        with open(result_path, "wb") as fh:
            while left > 0:
                piece = min(left, 64 * 1024)
                fh.write(b"x" * piece)
                fh.flush()
                left -= piece
                time.sleep(float(payload["pause"]))
    elif do == "daemon":
        pid_file = payload["pid_file"]
        if os.fork() == 0:
            os.setsid()
            if os.fork() == 0:
                with open(pid_file + ".tmp", "w") as fh:
                    fh.write(f"{os.getpid()} {os.getsid(0)} {os.getpgid(0)}")
                os.replace(pid_file + ".tmp", pid_file)
                devnull = os.open(os.devnull, os.O_RDWR)
                for fd in (0, 1, 2):
                    os.dup2(devnull, fd)
                time.sleep(600)
            os._exit(0)
        os.wait()
        while not os.path.exists(pid_file):
            time.sleep(0.01)
        time.sleep(float(payload.get("then_sleep", 0)))
    elif do == "close_stdout":
        sys.stdout.flush()
        os.close(1)
        os.close(2)
        time.sleep(float(payload["sleep"]))
    elif do == "flood":
        chunk = b"y" * (1024 * 1024)
        while True:
            os.write(1, chunk)
            time.sleep(0.05)
    elif do == "env":
        launch = os.path.join(os.path.dirname(result_path), "launch.json")
        with open(launch) as fh:
            launch_json = fh.read()
        with open(result_path, "w") as fh:
            json.dump({"env": dict(os.environ), "launch_json": launch_json}, fh)
    else:
        print(f"unknown: {do}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
