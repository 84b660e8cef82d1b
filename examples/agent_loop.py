#!/usr/bin/env python3
"""A scripted agent loop on Paddock — no model, a fixed plan — that does what a coding agent
does with the Python SDK's tools (paddock.tools): create a computer, install a tool into it,
write a program, run it, snapshot, break the original, fork the snapshot, check the fork, and
clean up. Each step is a tool call with JSON arguments and a check of the observation, the
way an agent framework would call the tools a model chose.

    PADDOCK_SOCKET=/run/paddock/paddock.sock python3 examples/agent_loop.py [--image IMG]

(or PADDOCK_HOST + PADDOCK_TOKEN + PADDOCK_FINGERPRINT for a remote daemon). It needs only a
POSIX shell in the image; it never touches the network. Exit status 0 when every check passed.
"""
import argparse
import json
import os
import sys
import uuid

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "sdk",
                                "python"))
from paddock import Paddock  # noqa: E402
from paddock.tools import make_tools  # noqa: E402

TOOL_SCRIPT = """#!/bin/sh
# wordcount: a tiny "package" the agent installs: counts words of its arguments
echo "$#"
"""

PROGRAM = """#!/bin/sh
# fib N: the N-th Fibonacci number, written by the "agent"
n=${1:-10}; a=0; b=1; i=0
while [ "$i" -lt "$n" ]; do t=$((a + b)); a=$b; b=$t; i=$((i + 1)); done
echo "$a"
"""


def plan(box, fork):
    """The fixed list of steps: (why, tool, arguments, check of the observation). Arguments
    that depend on an earlier observation are a function of them (by tool name)."""
    return [
        ("make a persistent computer to work in", "create_environment",
         {"name": box, "kind": "computer", "network": "none", "labels": {"demo": "agent-loop"}},
         lambda o: o["state"] == "running"),
        ("install a tool (a script into /usr/local/bin)", "write_file",
         {"environment": box, "path": "/usr/local/bin/wordcount", "content": TOOL_SCRIPT,
          "mode": "0755"},
         lambda o: o["size"] == len(TOOL_SCRIPT)),
        ("check that the tool is installed", "run_command",
         {"environment": box, "command": "wordcount one two three"},
         lambda o: o["exit_code"] == 0 and o["stdout"] == "3\n"),
        ("write the program", "write_file",
         {"environment": box, "path": "/root/app/fib.sh", "content": PROGRAM, "mode": "0755"},
         lambda o: o["path"] == "/root/app/fib.sh"),
        ("run it", "run_command",
         {"environment": box, "command": ["/root/app/fib.sh", "20"], "timeout": 30},
         lambda o: o["exit_code"] == 0 and o["stdout"] == "6765\n"),
        ("run a longer job in the background", "start_process",
         {"environment": box, "command": "/root/app/fib.sh 30"},
         lambda o: o["id"] >= 1),
        ("collect the background job's output once it is done", "read_process_output",
         lambda seen: {"environment": box, "id": seen["start_process"]["id"],
                       "wait_seconds": 30},
         lambda o: o["state"] == "exited" and o["stdout"] == "832040\n"),
        ("snapshot the working state", "snapshot_environment",
         {"environment": box, "name": "working"},
         lambda o: o["name"] == "working"),
        ("break the original on purpose", "run_command",
         {"environment": box, "command": "rm -rf /root/app /usr/local/bin/wordcount"},
         lambda o: o["exit_code"] == 0),
        ("fork the snapshot into a new computer", "fork_environment",
         {"environment": box, "new_name": fork, "snapshot": "working"},
         lambda o: o["state"] == "running"),
        ("check that the fork has the program and the tool", "run_command",
         {"environment": fork, "command": "/root/app/fib.sh 10 && wordcount a b"},
         lambda o: o["exit_code"] == 0 and o["stdout"] == "55\n2\n"),
        ("check that the original is still broken (the fork is a copy)", "list_files",
         {"environment": box, "path": "/root"},
         lambda o: "app" not in [e["name"] for e in o["entries"]]),
        ("see both computers", "list_environments", {"label": "demo=agent-loop"},
         lambda o: sorted(e["name"] for e in o["environments"]) == sorted([box, fork])),
    ]


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--image", help="image of the computer (default: the daemon's default)")
    args = ap.parse_args()

    client = Paddock()
    tools = {t.name: t for t in make_tools(client)}
    suffix = uuid.uuid4().hex[:8]
    box, fork = "agent-" + suffix, "agent-" + suffix + "-fork"
    steps = plan(box, fork)
    if args.image:
        steps[0][2]["image"] = args.image
    ok = True
    seen = {}
    try:
        for n, (why, name, arguments, check) in enumerate(steps, 1):
            if callable(arguments):
                arguments = arguments(seen)
            print("step %d: %s\n  -> %s %s" % (n, why, name, json.dumps(arguments)[:120]))
            observation = tools[name].run(arguments)  # what a framework hands back to a model
            print("  <- %s" % json.dumps(observation)[:200])
            seen[name] = observation
            if "error" in observation or not check(observation):
                print("step %d failed" % n)
                ok = False
                break
    finally:
        for env in (fork, box):  # clean up, whatever happened
            r = tools["destroy_environment"].run({"environment": env})
            print("cleanup: %s" % json.dumps(r))
        client.close()
    print("all steps passed" if ok else "FAILED")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
