"""Many environments at once: listing and inspecting must not cost time per environment that
grows with their number (issue 12). Not a benchmark (bench/scale.py is): the bound is generous
and only catches a quadratic path coming back — with per-environment firewall listings, `ls`
took ~13 s at 200 networked computers on the 2-core test machine; now ~0.1 s at 300."""
import time

N = 300
LS_BOUND_S = 5.0


def test_ls_and_inspect_with_300_networked_computers(daemon):
    d = daemon
    assert d.api("GET", "/v1/system").json["network"] == "routed"
    names = ["sc%d" % i for i in range(N)]
    for name in names:
        r = d.api("POST", "/v1/envs", {"name": name, "kind": "computer",
                                       "network": {"mode": "open"}})
        assert r.status == 201, r
        assert r.json["network"]["ip"], r.json

    t0 = time.monotonic()
    r = d.api("GET", "/v1/envs")
    took = time.monotonic() - t0
    assert r.status == 200, r
    envs = r.json["envs"]
    assert sorted(e["name"] for e in envs) == sorted(names)
    assert all(e["state"] == "running" and e["network"]["ip"] for e in envs)
    assert len({e["network"]["ip"] for e in envs}) == N  # every address handed out once
    assert took < LS_BOUND_S, "GET /v1/envs took %.2f s with %d computers" % (took, N)

    e = d.inspect(names[N // 2])
    assert e["name"] == names[N // 2] and e["state"] == "running"
    assert e["network"]["mode"] == "open" and e["network"]["denied"] == 0, e["network"]
    # the same figures as in the listing (counters read in one pass there)
    listed = {x["name"]: x for x in envs}[names[N // 2]]
    assert listed["network"]["ip"] == e["network"]["ip"]
    assert listed["network"]["denied"] == e["network"]["denied"]

    # Published ports are read once for the whole listing: each environment still shows its
    # own, and a change shows at once.
    a, b = names[0], names[N - 1]
    assert d.api("POST", "/v1/envs/%s/ports" % a, {"host_port": 18080, "port": 80}).status == 201
    assert d.api("POST", "/v1/envs/%s/ports" % b, {"host_port": 18081, "port": 81}).status == 201
    listed = {x["name"]: x["network"]["ports"] for x in d.envs().values()}
    assert listed[a] == [{"proto": "tcp", "host_port": 18080, "port": 80}], listed[a]
    assert listed[b] == [{"proto": "tcp", "host_port": 18081, "port": 81}], listed[b]
    assert sum(len(p) for p in listed.values()) == 2
    assert d.api("DELETE", "/v1/envs/%s/ports/18080?proto=tcp" % a).status == 200
    assert d.envs()[a]["network"]["ports"] == []
    assert d.inspect(b)["network"]["ports"] == [{"proto": "tcp", "host_port": 18081, "port": 81}]
