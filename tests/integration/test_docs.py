"""The reference docs cannot drift from the code: docs/API.md documents exactly the routes of
paddockd's route table (`paddockd --routes`), and docs/cli.md exactly the verbs and sub-verbs
that `paddock --help` and each `paddock VERB --help` list. No daemon is started.

docs/API.md: one heading per route, `### `METHOD /v1/pattern``.
docs/cli.md: one table row per command, its first cell `paddock VERB` or `paddock VERB SUB`.
"""
import os
import re
import subprocess

from conftest import BUILD, PADDOCK, PADDOCKD, REPO

API_MD = os.path.join(REPO, "docs", "API.md")
CLI_MD = os.path.join(REPO, "docs", "cli.md")

METHODS = ("GET", "HEAD", "POST", "PUT", "PATCH", "DELETE")
ROUTE_HEADING = re.compile(r"^#{2,6} `(%s) (/\S*)`\s*$" % "|".join(METHODS))
CLI_ROW = re.compile(r"^\|\s*`paddock ([a-z][a-z-]*)(?: ([a-z][a-z-]*))?`\s*\|")
WORD = re.compile(r"^[a-z][a-z-]*$")
WORDS = re.compile(r"^[a-z][a-z-]*(\|[a-z][a-z-]*)*$")


def run(*argv):
    p = subprocess.run(list(argv), stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=30,
                       env=dict(os.environ, PATH=BUILD + ":" + os.environ.get("PATH", "")))
    assert p.returncode == 0, "%s exited %d: %s" % (argv, p.returncode, p.stderr.decode())
    return p.stdout.decode()


def drift(what, code, docs, doc_name):
    """A message naming both lists, or None when the two sets agree."""
    missing, extra = sorted(code - docs), sorted(docs - code)
    if not missing and not extra:
        return None
    msg = []
    if missing:
        msg.append("%s not documented in %s:\n    %s" % (what, doc_name, "\n    ".join(missing)))
    if extra:
        msg.append("%s documented in %s that do not exist:\n    %s"
                   % (what, doc_name, "\n    ".join(extra)))
    return "\n".join(msg)


# --------------------------------------------------------------------------- API routes


def router_routes():
    routes = set()
    for line in run(PADDOCKD, "--routes").splitlines():
        method, pattern = line.split(" ")
        assert method in METHODS and (pattern.startswith("/v1") or pattern in ("/metrics", "/mcp")), \
            "odd route line %r" % line
        routes.add("%s %s" % (method, pattern))
    return routes


def documented_routes(text):
    return {"%s %s" % m.groups() for m in map(ROUTE_HEADING.match, text.splitlines()) if m}


def test_api_md_documents_every_route():
    routes = router_routes()
    assert len(routes) > 30, "paddockd --routes printed too little: %r" % routes
    with open(API_MD) as f:
        problem = drift("routes", routes, documented_routes(f.read()), "docs/API.md")
    assert problem is None, problem


# --------------------------------------------------------------------------- CLI verbs


def overview_commands(text):
    """(verb, sub or None) from `paddock --help`: its indented command lines, like
    `start|stop|restart NAME...`, `image ls|import|export|pull|build|rm`, `snapshot ls|rm NAME`."""
    cmds = set()
    for line in text.splitlines():
        if not line.startswith("  ") or line.startswith("   "):
            continue
        tokens = re.split(r"\s{2,}", line.strip())[0].split()  # the spec, not its description
        if not WORDS.match(tokens[0]):
            continue  # an option (--json) or prose
        sub = tokens[1] if len(tokens) > 1 and WORDS.match(tokens[1]) else None
        for verb in tokens[0].split("|"):
            for s in sub.split("|") if sub else [None]:
                cmds.add((verb, s))
    return cmds


def verb_help_commands(verb, text):
    """(verb, sub or None) from `paddock VERB --help`: its Usage lines (`paddock snapshot ls
    NAME`, `paddock start|stop|restart|pause|resume NAME...`) and, for `Usage: paddock VERB
    COMMAND`, the command lines below (`  add NAME HOSTPORT:PORT...`)."""
    cmds = set()
    takes_command = False
    for line in text.splitlines():
        m = re.match(r"^(?:Usage:)?\s+paddock (\S+)(?: (\S+))?", line)
        if m:
            verbs, sub = m.group(1), m.group(2)
            if sub == "COMMAND":
                takes_command = True
                continue
            for v in verbs.split("|"):
                for s in sub.split("|") if sub and WORDS.match(sub) else [None]:
                    cmds.add((v, s))
            continue
        tokens = line.split()
        if takes_command and line.startswith("  ") and not line.startswith("   ") and \
                WORD.match(tokens[0]):
            cmds.add((verb, tokens[0]))
    return cmds


def cli_commands():
    overview = run(PADDOCK, "--help")
    cmds = overview_commands(overview)
    assert len({v for v, _ in cmds}) > 20, "parsed too few verbs from paddock --help:\n" + overview
    for verb in sorted({v for v, _ in cmds}):
        if verb == "daemon":
            continue  # `paddock daemon --help` is paddockd's help: no sub-verbs
        cmds |= verb_help_commands(verb, run(PADDOCK, verb, "--help"))
    # A verb listed only with sub-verbs (image, port) is not a command of its own.
    return {"%s %s" % (v, s) if s else v for v, s in cmds}


def documented_commands(text):
    out = set()
    for line in text.splitlines():
        m = CLI_ROW.match(line)
        if m:
            out.add(" ".join(g for g in m.groups() if g))
    return out


def test_cli_md_documents_every_command():
    cmds = cli_commands()
    with open(CLI_MD) as f:
        problem = drift("commands", cmds, documented_commands(f.read()), "docs/cli.md")
    assert problem is None, problem


def test_every_source_file_is_on_the_architecture_map():
    """docs/architecture.md names every C file of src/: a new file comes with its line."""
    import glob
    with open(os.path.join(REPO, "docs", "architecture.md")) as f:
        text = f.read()
    missing = [p for p in sorted(glob.glob(os.path.join(REPO, "src", "*", "*.c")))
               if "`%s`" % os.path.basename(p) not in text]
    assert missing == [], missing
