"""What an agent token sees of the daemon's records: its own environments' events and its own
quota refusals (never another token's), its own audit records, its own environments' metrics
and no daemon-wide series. The administrator sees everything."""
import json

from conftest import UnixHTTPConnection
from test_tokens import as_token, bearer, create_as, make_token


class Events:
    """GET /v1/events as one caller, read line by line."""

    def __init__(self, d, secret=None):
        self.c = UnixHTTPConnection(d.sock, timeout=30)
        self.c.request("GET", "/v1/events", headers=bearer(secret) if secret else {})
        self.r = self.c.getresponse()
        assert self.r.status == 200, self.r.read()

    def until(self, pred, limit=200):
        seen = []
        for _ in range(limit):
            line = self.r.readline()
            assert line, "stream ended; saw %s" % seen
            seen.append(json.loads(line))
            if pred(seen[-1]):
                return seen
        raise AssertionError("not found in %s" % seen)

    def close(self):
        self.c.close()


def test_events_show_only_what_the_token_may_see(daemon):
    a = make_token(daemon, "ev-a", max_envs=1)
    b = make_token(daemon, "ev-b")
    sa, sb, admin = Events(daemon, a), Events(daemon, b), Events(daemon)
    try:
        assert create_as(daemon, b, "b-env", kind="sandbox").status == 201
        assert create_as(daemon, a, "a-env", kind="sandbox").status == 201
        r = create_as(daemon, a, "a-two", kind="sandbox")  # over max-envs
        assert r.status == 403 and r.error()[0] == "quota_exceeded", r
        assert create_as(daemon, b, "b-last", kind="sandbox").status == 201
        # b's stream: its own creates only, up to its last one
        seen = sb.until(lambda e: e.get("env") == "b-last" and e["type"] == "created")
        assert {e.get("env") for e in seen} <= {"b-env", "b-last"}, seen
        assert not [e for e in seen if e["type"] == "quota_refused"], seen
        # a's stream: its env, then its own refusal naming the limit
        seen = sa.until(lambda e: e["type"] == "quota_refused")
        assert {e.get("env") for e in seen if e["type"] != "quota_refused"} == {"a-env"}, seen
        refusal = seen[-1]
        assert refusal.get("token") == "ev-a" and "max-envs" in json.dumps(refusal), refusal
        # the administrator sees all of it
        seen = admin.until(lambda e: e.get("env") == "b-last" and e["type"] == "created")
        envs = {e.get("env") for e in seen}
        assert {"a-env", "b-env", "b-last"} <= envs, seen
        assert [e for e in seen if e["type"] == "quota_refused"], seen
    finally:
        for s in (sa, sb, admin):
            s.close()


def test_audit_shows_a_token_only_its_own_records(daemon):
    a = make_token(daemon, "au-a")
    b = make_token(daemon, "au-b")
    assert create_as(daemon, a, "au-a-env", kind="sandbox").status == 201
    assert create_as(daemon, b, "au-b-env", kind="sandbox").status == 201
    assert as_token(daemon, a, "POST", "/v1/envs/au-a-env/exec",
                    {"cmd": ["echo", "from-a"]}).status == 200
    mine = as_token(daemon, a, "GET", "/v1/audit")
    assert mine.status == 200, mine
    recs = mine.json["records"]
    assert recs and {r["token"] for r in recs} == {"au-a"}, recs
    assert any(r.get("argv") == ["echo", "from-a"] for r in recs), recs
    assert as_token(daemon, a, "GET", "/v1/audit?token=au-b").status == 403
    everything = daemon.api("GET", "/v1/audit").json["records"]
    assert {"au-a", "au-b"} <= {r["token"] for r in everything}


def test_metrics_show_a_token_only_its_own_environments(daemon):
    a = make_token(daemon, "me-a")
    b = make_token(daemon, "me-b")
    assert create_as(daemon, a, "me-a-env", kind="sandbox").status == 201
    assert create_as(daemon, b, "me-b-env", kind="sandbox").status == 201
    r = as_token(daemon, a, "GET", "/metrics")
    assert r.status == 200, r
    text = r.body.decode()
    assert 'env="me-a-env"' in text
    assert 'env="me-b-env"' not in text
    assert "paddock_api_requests_total" not in text and "paddock_envs{" not in text
    body = daemon.api("GET", "/metrics").body.decode()
    assert 'env="me-b-env"' in body and "paddock_api_requests_total" in body
