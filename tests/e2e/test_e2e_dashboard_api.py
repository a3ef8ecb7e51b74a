"""The plugin's dashboard API in a real AstrBot: every route through
AstrBot's own web layer and authentication, at every URL prefix the AstrBot
under test has.

- ``/api/v1/plugins/extensions/astrbot_plugin_ltm/…`` (AstrBot 4.29 and
  later; every method; a dashboard JWT or an API key with the ``plugin`` scope);
- ``/api/plug/astrbot_plugin_ltm/…`` (every version; GET and POST; a
  dashboard JWT only). Before 4.29 it is the only one, and the PATCH, DELETE
  and PUT calls below go to the plugin's POST equivalents there
  (``post_equivalent``), so every route is still tested.

One AstrBot serves the module (default ``shadow`` mode, memories learned
from real chats with the fake model); the round-trip test starts a second,
fresh one to import into.
"""

from __future__ import annotations

import copy
import json
import re
import subprocess
import urllib.parse
import uuid
from datetime import UTC, datetime
from pathlib import Path

import pytest

from astrbot_plugin_ltm.operating.export_format import FORMAT, VERSION, checksum
from astrbot_plugin_ltm.operating.serialize import EVENT_FIELDS, ITEM_FIELDS
from astrbot_plugin_ltm.text import normalize_fact_key
from devtools.astrbot_home import LEGACY_DASHBOARD, Client
from devtools.exports import like_a_browser

pytestmark = pytest.mark.e2e
REPO = Path(__file__).resolve().parents[2]
PASSWORD = "Ltm-E2e-Passw0rd"  # the dashboard login tests/e2e/conftest.py sets up

V1 = "/api/v1/plugins/extensions/astrbot_plugin_ltm"
LEGACY = "/api/plug/astrbot_plugin_ltm"
# The prefix the calls without one go to: V1 from AstrBot 4.29, before it
# LEGACY (AstrBot has no V1 route then, so there is nothing of ours to test).
MAIN = Client.plugin_api()
PREFIXES = (LEGACY,) if LEGACY_DASHBOARD else (V1, LEGACY)
PLUGIN_CONFIG = "data/config/astrbot_plugin_ltm_config.json"


@pytest.fixture(scope="module")
def bot(bot_factory):
    with bot_factory("dashboard-api", {}) as b:
        b.chat("My name is Alice and I live in Paris", "alice", "api-1")
        b.chat("我叫小明，住在北京", "xiaoming", "api-2")
        b.wait_extracted("alice", ["name is Alice", "lives in Paris"], "shadow")
        b.wait_extracted("xiaoming", ["名字是小明", "住在北京"], "shadow")
        yield b


# -- helpers -----------------------------------------------------------------------


def post_equivalent(method: str, route: str, body):
    """``/api/plug`` takes GET and POST only: PATCH, DELETE and PUT become the
    plugin's POST routes that do the same (docs/api.md)."""
    path = route.split("?", 1)[0]
    if method == "PATCH" and re.fullmatch(r"items/[^/]+", path):
        return "POST", f"{route}/update", body
    if method == "DELETE" and re.fullmatch(r"items/[^/]+", path):
        return "POST", f"{route}/delete", {} if body is None else body
    if method == "PUT" and path == "policy":
        return "POST", route, body
    raise AssertionError(f"no POST equivalent of {method} {route}")


def call(bot, method: str, route: str, body=None, *, prefix: str = MAIN, auth: str | None = "jwt",
         client: Client | None = None, headers: dict | None = None) -> tuple[int, dict, str]:
    """(HTTP status, JSON body, raw text) of one API call."""
    if prefix == LEGACY and method in ("PATCH", "DELETE", "PUT"):
        method, route, body = post_equivalent(method, route, body)
    route = urllib.parse.quote(route, safe="/?&=:,%")  # non-ASCII query values (Chinese search)
    resp = (client or bot.client).request(method, f"{prefix}/{route}", body, auth=auth, raw=True, headers=headers)
    with resp:
        status, text = resp.status, resp.read().decode()
    try:
        payload = json.loads(text)
    except json.JSONDecodeError:
        payload = {}
    return status, payload, text


def ok(bot, method: str, route: str, body=None, **kw):
    status, payload, text = call(bot, method, route, body, **kw)
    assert status == 200 and payload.get("status") == "ok" and "data" in payload, bot.diag(
        f"{method} {route}: {status} {text[:500]}")
    return payload["data"]


def refused(bot, expect: int, method: str, route: str, body=None, **kw) -> str:
    """A clear refusal: the status, an error envelope, a message, no trace."""
    status, payload, text = call(bot, method, route, body, **kw)
    assert status == expect, bot.diag(f"{method} {route}: expected {expect}, got {status} {text[:500]}")
    assert payload.get("status") == "error", text[:500]
    message = payload.get("message")
    assert isinstance(message, str) and message.strip(), text[:500]
    assert "Traceback" not in text and 'File "' not in text, text[:2000]
    return message


def export_file(bot, query: str = "", prefix: str = MAIN) -> tuple[bytes, dict]:
    """The export as AstrBot serves it: the file itself with a download name
    (no envelope). Returns its bytes and the document."""
    resp = bot.client.request("GET", f"{prefix}/export{query}", raw=True)
    with resp:
        status, headers, content = resp.status, resp.headers, resp.read()
    assert status == 200, bot.diag(f"export{query}: {status} {content[:500]!r}")
    assert headers["Content-Type"].startswith("application/json"), headers
    assert re.fullmatch(r'attachment; filename="ltm-export-\d{4}-\d{2}-\d{2}\.json"',
                        headers["Content-Disposition"]), headers["Content-Disposition"]
    document = json.loads(content)
    assert document["format"] == FORMAT and "status" not in document
    return content, document


def multipart(field: str, filename: str, content: bytes) -> tuple[bytes, dict]:
    boundary = f"ltm-{uuid.uuid4().hex}"
    body = (
        f"--{boundary}\r\nContent-Disposition: form-data; name=\"{field}\"; filename=\"{filename}\"\r\n"
        "Content-Type: application/json\r\n\r\n"
    ).encode() + content + f"\r\n--{boundary}--\r\n".encode()
    return body, {"Content-Type": f"multipart/form-data; boundary={boundary}"}


def make_export(n: int, scope_id: str, word: str) -> dict:
    """A valid export of ``n`` evidence-less memories (for bulk set-up)."""
    now = datetime.now(UTC).isoformat()
    items = []
    for k in range(n):
        fact = f"{word} fact number {k}"
        record = {
            "memory_id": str(uuid.uuid4()), "scope": "user", "scope_id": scope_id, "type": "episode",
            "fact": fact, "fact_key": normalize_fact_key(fact), "confidence": 0.5, "importance": 0.5,
            "evidence_count": 1, "ttl_days": None, "status": "shadow", "awaiting_approval": False,
            "created_at": now, "updated_at": now, "evidence": [],
        }
        record["checksum"] = checksum(record)
        items.append(record)
    return {"format": FORMAT, "version": VERSION, "exported_at": now, "filters": {}, "count": n,
            "items": items, "checksum": checksum([i["checksum"] for i in items])}


def settle(bot) -> None:
    """Wait for the background embedding of new memories and turns (each
    gets a vector a moment after it is written), so snapshots only see
    requests."""
    bot.wait_for(lambda: bot.unembedded() == 0, 20, "every memory and turn to be embedded")


# Vectors are a cache the worker may refresh at any time: only which rows
# have one counts.
VECTOR_ROWS = {
    "ltm_item_vectors": "SELECT item_id, scope, scope_id, model FROM ltm_item_vectors",
    "ltm_turn_vectors": "SELECT event_rowid, space FROM ltm_turn_vectors",
}


def snapshot(bot) -> dict[str, list]:
    """Every row of every ltm_ table: any write shows up here."""
    settle(bot)
    out = {}
    for table in bot.ltm_tables():
        sql = VECTOR_ROWS.get(table, f'SELECT * FROM "{table}"')
        out[table] = sorted(repr(tuple(r)) for r in bot.query(sql))
    return out


def changes(before: dict[str, list], after: dict[str, list]) -> str:
    """The rows that differ between two snapshots (for failure messages)."""
    out = []
    for table in sorted(set(before) | set(after)):
        gone = sorted(set(before.get(table, [])) - set(after.get(table, [])))
        new = sorted(set(after.get(table, [])) - set(before.get(table, [])))
        if gone or new:
            out.append(f"{table}: -{gone[:5]} +{new[:5]}")
    return "\n".join(out)


def assert_unchanged(bot, before: dict[str, list]) -> None:
    after = snapshot(bot)
    assert after == before, bot.diag("rows were written:\n" + changes(before, after))


def item_id(bot, fact_part: str) -> str:
    found = [i for i in bot.items() if fact_part in i["fact"]]
    assert len(found) == 1, [i["fact"] for i in bot.items()]
    return found[0]["memory_id"]


# -- authentication ----------------------------------------------------------------------


def test_auth_is_refused_without_a_valid_login_at_both_prefixes(bot):
    facts = [i["fact"] for i in bot.items()]
    assert facts
    name = item_id(bot, "name is Alice")
    before = snapshot(bot)
    keyless = Client(bot.url)  # no token, no key
    forged = {"Authorization": "Bearer eyJhbGciOiJIUzI1NiJ9.eyJ1c2VybmFtZSI6ImFzdHJib3QifQ.forged"}
    attempts = [
        ("GET", "items", None), ("GET", f"items/{name}", None), ("GET", "export", None),
        ("GET", "policy", None), ("GET", "stats", None), ("GET", "audit", None),
        ("POST", "items/review", {"memory_ids": [name], "decision": "approve"}),
        ("POST", f"items/{name}/update", {"importance": 0.01}), ("POST", f"items/{name}/delete", {}),
        ("POST", "policy", {"emergency_read_only": True}),
    ]
    for prefix in PREFIXES:
        for method, route, body in attempts:
            for headers in (None, forged):
                status, payload, text = call(bot, method, route, body, prefix=prefix, auth=None,
                                             client=keyless, headers=headers)
                assert status == 401, (prefix, method, route, headers, status, text[:300])
                assert payload.get("status") == "error" and not payload.get("data"), text[:300]
                assert not any(f in text for f in facts) and name not in text, text[:300]
    for method, route, body in [("PATCH", f"items/{name}", {"importance": 0.01}), ("DELETE", f"items/{name}", None),
                                ("PUT", "policy", {"emergency_read_only": True})]:
        assert call(bot, method, route, body, auth=None, client=keyless)[0] == 401

    if LEGACY_DASHBOARD:
        # Before 4.29 API keys have no "plugin" scope and there are no v1
        # plugin routes: a key with every scope it can have is refused on
        # the legacy routes, which want a dashboard login.
        any_key = Client(bot.url)
        any_key.token = bot.client.token
        any_key.create_api_key("ltm-every-scope")
        for method, route, body in attempts:
            status, payload, text = call(bot, method, route, body, prefix=LEGACY, auth="key", client=any_key)
            assert status == 401 and payload.get("status") == "error", (route, status, text[:300])
            assert not any(f in text for f in facts), text[:300]
        assert_unchanged(bot, before)
    else:
        # An API key without the plugin scope is refused on the v1 routes ...
        scoped = Client(bot.url)
        scoped.token = bot.client.token
        scoped.create_api_key("ltm-no-plugin-scope", scopes=["chat", "config"])
        for method, route, body in attempts:
            status, payload, text = call(bot, method, route, body, auth="key", client=scoped)
            assert status in (401, 403) and payload.get("status") == "error", (route, status, text[:300])
            assert not any(f in text for f in facts), text[:300]
        # ... and any API key on the legacy routes, which want a dashboard login.
        plugin_key = Client(bot.url)
        plugin_key.token = bot.client.token
        plugin_key.create_api_key("ltm-plugin-scope", scopes=["plugin"])
        assert call(bot, "GET", "items", auth="key", client=plugin_key, prefix=LEGACY)[0] == 401
        assert_unchanged(bot, before)
        # A key with the plugin scope is enough for v1 (scripts, monitoring).
        assert ok(bot, "GET", "stats", auth="key", client=plugin_key)["totals"]["items"] == len(facts)


# -- every route, valid and bad input -------------------------------------------------------


def test_every_route_answers_valid_input_and_refuses_bad_input_clearly(bot):
    spare = make_export(4, "webchat:spare", "spare")
    assert ok(bot, "POST", "import", spare)["added"] == 4
    spare_ids = [i["memory_id"] for i in spare["items"]]
    name, city = item_id(bot, "name is Alice"), item_id(bot, "lives in Paris")

    # items
    data = ok(bot, "GET", "items?page=1&page_size=10&sort=confidence")
    assert data["total"] == 8 and len(data["items"]) == 8 and data["page_size"] == 10
    assert "page_size" in refused(bot, 400, "GET", "items?page_size=500")
    assert "status" in refused(bot, 400, "GET", "items?status=deleted")
    # named as they said, not by the login
    assert [i["fact"] for i in ok(bot, "GET", "items?q=北京")["items"]] == ["小明住在北京"]
    assert [i["memory_id"] for i in ok(bot, "GET", "items?q=Paris&scope=user")["items"]] == [city]
    legacy = ok(bot, "GET", "items?status=shadow&type=profile&page_size=200", prefix=LEGACY)
    assert legacy["total"] == 4
    assert "type" in refused(bot, 400, "GET", "items?type=hobby", prefix=LEGACY)
    # one item, with its evidence and the source event
    detail = ok(bot, "GET", f"items/{name}")
    assert detail["fact"] == "Alice's name is Alice" and detail["status"] == "shadow"
    (evidence,) = detail["evidence"]
    assert evidence["event"]["content"]["text"] == "My name is Alice and I live in Paris"
    assert evidence["event"]["sender_id"] == "alice"
    assert "no memory" in refused(bot, 404, "GET", "items/no-such-memory")
    # ... or by the 8 characters /ltm list shows; % and _ are not wildcards
    assert ok(bot, "GET", f"items/{name[:8]}")["memory_id"] == name
    refused(bot, 404, "GET", "items/%25%25%25%25")
    assert "4 characters" in refused(bot, 400, "GET", f"items/{name[:3]}")
    # review
    data = ok(bot, "POST", "items/review", {"memory_ids": [spare_ids[0]], "decision": "approve", "reason": "e2e"})
    assert data == {"reviewed": [{"memory_id": spare_ids[0], "decision": "approve"}]}
    assert "memory_ids" in refused(bot, 400, "POST", "items/review", {"memory_ids": "all", "decision": "approve"})
    assert "decision" in refused(bot, 400, "POST", "items/review", {"memory_ids": [city], "decision": "yes"},
                                 prefix=LEGACY)
    refused(bot, 404, "POST", "items/review", {"memory_ids": [city, "no-such-memory"], "decision": "approve"})
    assert next(i for i in bot.items() if i["memory_id"] == city)["status"] == "shadow"  # all or nothing
    # edit: PATCH (v1) and POST …/update (both prefixes)
    assert ok(bot, "PATCH", f"items/{spare_ids[1]}", {"importance": 0.3})["importance"] == 0.3
    assert "importance" in refused(bot, 400, "PATCH", f"items/{spare_ids[1]}", {"importance": 3})
    assert "JSON" in refused(bot, 400, "PATCH", f"items/{spare_ids[1]}", b"{not json")
    assert ok(bot, "POST", f"items/{spare_ids[1]}/update", {"type": "profile"}, prefix=LEGACY)["type"] == "profile"
    assert "type" in refused(bot, 400, "POST", f"items/{spare_ids[1]}/update", {"type": "hobby"})
    refused(bot, 404, "POST", "items/no-such-memory/update", {"importance": 0.1}, prefix=LEGACY)
    # delete: DELETE (v1) and POST …/delete (both prefixes)
    assert ok(bot, "DELETE", f"items/{spare_ids[2]}")["memory_id"] == spare_ids[2]
    refused(bot, 404, "DELETE", f"items/{spare_ids[2]}")
    assert ok(bot, "POST", f"items/{spare_ids[3]}/delete", {}, prefix=LEGACY)["memory_id"] == spare_ids[3]
    refused(bot, 404, "POST", "items/no-such-memory/delete", {})
    assert not {spare_ids[2], spare_ids[3]} & {i["memory_id"] for i in bot.items()}
    assert bot.query("SELECT count(*) AS n FROM ltm_tombstones")[0]["n"] == 2
    # events
    events = ok(bot, "GET", "events?scope=user&source_type=message&page_size=50")
    assert events["total"] == 4 and {e["extraction_status"] for e in events["events"]} == {"done"}
    assert "status" in refused(bot, 400, "GET", "events?status=stuck")
    refused(bot, 400, "GET", "events?page=0", prefix=LEGACY)
    # stats
    stats = ok(bot, "GET", "stats")
    assert stats["totals"]["items"] == 6 and stats["mode"] == "shadow" and stats["emergency_read_only"] is False
    alice = ok(bot, "GET", "stats?scope=user&scope_id=webchat:alice", prefix=LEGACY)["scopes"]
    assert [(s["scope_id"], s["by_status"]) for s in alice] == [("webchat:alice", {"shadow": 2})]
    assert "scope" in refused(bot, 400, "GET", "stats?scope=room")
    # audit
    audit = ok(bot, "GET", "audit?action=edit")
    assert audit["total"] == 2 and all(e["actor"] == "operator:astrbot" for e in audit["entries"])
    assert ok(bot, "GET", f"audit?memory_id={spare_ids[0]}", prefix=LEGACY)["entries"][0]["action"] == "approve"
    refused(bot, 400, "GET", "audit?page_size=0")
    # policy: GET, PUT (v1), POST (both prefixes)
    policy = ok(bot, "GET", "policy", prefix=LEGACY)
    assert policy["write_policy"]["mode"] == "shadow" and policy["emergency_read_only"] is False
    assert ok(bot, "PUT", "policy", {"read_policy": {"max_items": 12}})["read_policy"]["max_items"] == 12
    assert ok(bot, "POST", "policy", {"read_policy": {"max_items": 15}},
              prefix=LEGACY)["read_policy"]["max_items"] == 15
    assert "write_policy.mode" in refused(bot, 400, "PUT", "policy", {"write_policy": {"mode": "yolo"}})
    assert "cannot change" in refused(bot, 400, "POST", "policy", {"extraction": {"batch_size": 1}}, prefix=LEGACY)
    refused(bot, 400, "PUT", "policy", b"not json")
    # export: a file, at both prefixes
    _, export = export_file(bot, "?scope=user&scope_id=webchat:alice")
    assert export_file(bot, "?scope=user&scope_id=webchat:alice", prefix=LEGACY)[1]["items"] == export["items"]
    assert export["format"] == FORMAT and sorted(i["fact"] for i in export["items"]) == [
        "Alice lives in Paris", "Alice's name is Alice"]
    assert "status" in refused(bot, 400, "GET", "export?status=pending")
    # import (dry run here; real imports are tested below)
    before = snapshot(bot)
    report = ok(bot, "POST", "import?dry_run=1", make_export(2, "webchat:dry", "dry"), prefix=LEGACY)
    assert report["dry_run"] is True and report["added"] == 2
    assert "JSON" in refused(bot, 400, "POST", "import", b"this is not json")
    assert "format" in refused(bot, 400, "POST", "import", {"format": "other", "items": []}, prefix=LEGACY)
    assert_unchanged(bot, before)
    bot.assert_log_clean()


# -- pagination ------------------------------------------------------------------------------


def test_a_request_is_answered_in_its_language_at_both_prefixes(bot):
    """lang in the query, lang in a JSON body (not an unknown field), or
    Accept-Language: the message in Chinese, the code the same in both."""
    for prefix in PREFIXES:
        status, payload, _ = call(bot, "GET", "items?page_size=500&lang=zh", prefix=prefix)
        assert (status, payload) == (400, {"status": "error", "code": "api.between",
                                           "message": "page_size 必须在 1 到 200 之间"}), payload
        status, payload, _ = call(bot, "POST", "policy/rollback", {"version": "first", "lang": "zh"}, prefix=prefix)
        assert (status, payload["code"], payload["message"]) == (
            400, "api.version_number", "version 必须是从 1 开始的整数"), payload
        status, payload, _ = call(bot, "GET", "items/abc", prefix=prefix, headers={"Accept-Language": "zh-CN,zh;q=0.9"})
        assert (status, payload["code"], payload["message"]) == (
            400, "api.id_too_short", "请至少给出 memory id 的前 4 个字符"), payload
        status, payload, _ = call(bot, "GET", "items/abc", prefix=prefix)
        assert payload["message"] == "give at least 4 characters of the memory id", payload
    # A stored reason: learned in shadow mode, shown in Chinese with its code.
    entries = ok(bot, "GET", "audit?action=create&lang=zh")["entries"]
    assert ("影子模式：已保存，不注入", "gate.shadow") in {(e["reason"], e["reason_code"]) for e in entries}


def test_pagination_edges(bot):
    bulk = make_export(201, "webchat:bulk", "bulk")
    assert ok(bot, "POST", "import", bulk)["added"] == 201
    q = "items?scope=user&scope_id=webchat:bulk"
    full = ok(bot, "GET", f"{q}&page_size=200&sort=created")
    assert full["total"] == 201 and len(full["items"]) == 200
    rest = ok(bot, "GET", f"{q}&page_size=200&page=2&sort=created")
    assert len(rest["items"]) == 1
    assert {i["memory_id"] for i in full["items"] + rest["items"]} == {i["memory_id"] for i in bulk["items"]}
    assert ok(bot, "GET", f"{q}&page_size=200&page=3") == {"items": [], "total": 201, "page": 3, "page_size": 200}
    one = ok(bot, "GET", f"{q}&page_size=1")
    assert len(one["items"]) == 1 and one["total"] == 201
    last = ok(bot, "GET", f"{q}&page_size=1&page=201", prefix=LEGACY)
    assert len(last["items"]) == 1 and last["items"][0]["memory_id"] != one["items"][0]["memory_id"]
    assert ok(bot, "GET", f"{q}&page_size=1&page=202")["items"] == []
    assert len(ok(bot, "GET", f"{q}&page_size=50&page=5")["items"]) == 1
    assert ok(bot, "GET", f"{q}")["page_size"] == 50  # the default
    for bad in ("page_size=201", "page_size=0", "page=0", "page=-3", "page=x"):
        refused(bot, 400, "GET", f"{q}&{bad}")
    # search results page the same way
    found = ok(bot, "GET", "items?q=bulk&page_size=100&page=3")
    assert found["total"] == 201 and len(found["items"]) == 1
    assert ok(bot, "GET", "events?page=1000")["events"] == []
    assert ok(bot, "GET", "audit?page_size=200&page=1000")["entries"] == []


# -- export → import into a second AstrBot -----------------------------------------------------


class _AnyTime:
    def __eq__(self, other: object) -> bool:
        return isinstance(other, str) and bool(re.match(r"\d{4}-\d{2}-\d{2}T", other))


ANY_TIME = _AnyTime()


def fields(export: dict) -> list[dict]:
    return sorted(({k: i[k] for k in ITEM_FIELDS} for i in export["items"]), key=lambda i: i["memory_id"])


def evidence(export: dict) -> dict:
    return {i["memory_id"]: sorted((e["event_id"], json.dumps(e["event"], sort_keys=True)) for e in i["evidence"])
            for i in export["items"]}


def docs_commands() -> dict[str, str]:
    """The shell commands of docs/api.md's example (continued lines joined),
    by what they do: login, api, export, preview, import."""
    text = (REPO / "docs" / "api.md").read_text(encoding="utf-8")
    block = re.search(r"## Examples\n\n```bash\n(.*?)```", text, re.S)
    assert block, "docs/api.md lost its example"
    commands = [c for c in block.group(1).replace("\\\n", " ").splitlines() if c and not c.startswith("#")]
    named = {
        "login": [c for c in commands if c.startswith("TOKEN=")],
        "api": [c for c in commands if c.startswith("API=")],
        "export": [c for c in commands if c.startswith("curl") and "/export" in c],
        "preview": [c for c in commands if c.startswith("curl") and "import?dry_run=1" in c],
        "import": [c for c in commands if c.startswith("curl") and c.endswith('"$API/import"')],
    }
    assert all(len(found) == 1 for found in named.values()), named
    return {name: found[0] for name, found in named.items()}


def run_docs_commands(bot, workdir: Path, *names: str) -> str:
    """Run the documented commands as written, against ``bot`` (only the
    address and the password differ), in ``workdir``; their output."""
    commands = docs_commands()
    login = commands["login"].replace("<password>", PASSWORD)
    api = commands["api"]
    if LEGACY_DASHBOARD:  # before 4.29 the same commands work at the other prefix
        assert V1 in api, api
        api = api.replace(V1, LEGACY)
    script = "\n".join([f"BASE={bot.url}", login, api, *(commands[n] for n in names)])
    done = subprocess.run(["bash", "-euo", "pipefail", "-c", script], cwd=workdir, capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 0, (done.stdout[-2000:], done.stderr[-2000:])
    return done.stdout


def test_export_import_round_trip_into_a_second_astrbot(bot, bot_factory, tmp_path):
    # Give the export some variety: an approved memory and an edited one.
    ok(bot, "POST", "items/review", {"memory_ids": [item_id(bot, "住在北京")], "decision": "approve"})
    ok(bot, "PATCH", f"items/{item_id(bot, 'lives in Paris')}", {"importance": 0.95, "ttl_days": 30})
    _, doc = export_file(bot, "?scope_id=webchat:alice")
    _, doc_zh = export_file(bot, "?scope_id=webchat:xiaoming")
    assert doc["count"] == 2 and doc_zh["count"] == 2
    _, everything = export_file(bot)
    assert all(i["evidence"] and i["evidence"][0]["event"] for i in doc["items"] + doc_zh["items"])

    # The documented curl export writes the file as served.
    run_docs_commands(bot, tmp_path, "export")
    assert json.loads((tmp_path / "memories.json").read_bytes()) == {**everything, "exported_at": ANY_TIME}

    with bot_factory("dashboard-api-copy", {}) as copy_bot:
        empty = snapshot(copy_bot)
        assert copy_bot.items() == []
        # Dry runs write nothing, in each form the API accepts: the file as
        # served, re-serialised by a browser (1.0 → 1), in AstrBot's envelope,
        # wrapped as the page used to post it, uploaded to import/preview.
        raw, _ = export_file(bot, "?scope_id=webchat:alice")
        assert ok(copy_bot, "POST", "import?dry_run=1", raw)["added"] == 2
        assert ok(copy_bot, "POST", "import?dry_run=1", like_a_browser(doc))["added"] == 2
        assert ok(copy_bot, "POST", "import?dry_run=1", {"status": "ok", "data": doc})["added"] == 2
        assert ok(copy_bot, "POST", "import", {"dry_run": True, "export": doc})["added"] == 2
        body, headers = multipart("file", "ltm-export.json", raw)
        assert ok(copy_bot, "POST", "import?dry_run=1", body, headers=headers)["dry_run"] is True
        assert ok(copy_bot, "POST", "import/preview", body, headers=headers, prefix=LEGACY)["added"] == 2
        assert_unchanged(copy_bot, empty)

        # Tampered files are refused, and nothing is written.
        changed = copy.deepcopy(doc)
        changed["items"][0]["fact"] = "alice lives in Berlin"
        assert "checksum" in refused(copy_bot, 400, "POST", "import", changed)
        changed = copy.deepcopy(doc)
        changed["checksum"] = "0" * 64
        assert "checksum" in refused(copy_bot, 400, "POST", "import", changed, prefix=LEGACY)
        changed = copy.deepcopy(doc)
        del changed["items"][0]
        assert "checksum" in refused(copy_bot, 400, "POST", "import", {"dry_run": False, "export": changed})
        changed = copy.deepcopy(doc)
        changed["items"][1]["evidence"][0]["event"]["content"] = {"text": "forged"}
        body, headers = multipart("file", "forged.json", json.dumps(changed).encode())
        refused(copy_bot, 400, "POST", "import", body, headers=headers)
        assert_unchanged(copy_bot, empty)

        # The real import: docs/api.md's curl commands as written, with the
        # file the source bot's export wrote (preview, then import).
        preview = json.loads(run_docs_commands(copy_bot, tmp_path, "preview"))
        n = everything["count"]
        assert preview["status"] == "ok" and preview["data"]["dry_run"] is True and preview["data"]["added"] == n
        assert_unchanged(copy_bot, empty)
        report = json.loads(run_docs_commands(copy_bot, tmp_path, "import"))["data"]
        assert (report["dry_run"], report["added"], report["merged"], report["skipped"]) == (False, n, 0, 0)
        # An uploaded file and the page's old wrapping are the same memories: skipped.
        body, headers = multipart("file", "ltm-export.json", raw)
        assert ok(copy_bot, "POST", "import", body, headers=headers)["skipped"] == 2
        assert ok(copy_bot, "POST", "import", {"dry_run": False, "export": doc_zh})["skipped"] == 2
        _, copied = export_file(copy_bot)
        assert fields(copied) == fields(everything)
        assert evidence(copied) == evidence(everything)
        for item in doc["items"] + doc_zh["items"]:
            detail = ok(copy_bot, "GET", f"items/{item['memory_id'][:8]}")
            assert detail["evidence"] and all(set(e["event"]) >= set(EVENT_FIELDS) for e in detail["evidence"])
        # named as they said, not by the login
        assert [i["fact"] for i in ok(copy_bot, "GET", "items?q=北京")["items"]] == ["小明住在北京"]
        assert ok(copy_bot, "GET", "stats")["totals"]["items"] == n
        assert ok(copy_bot, "GET", "audit?action=import")["total"] == n

        # Importing the same files again changes nothing.
        after = snapshot(copy_bot)
        counts = copy_bot.ltm_counts()  # after snapshot(): the new items are embedded
        again = ok(copy_bot, "POST", "import", doc, prefix=LEGACY)
        assert (again["added"], again["merged"], again["skipped"]) == (0, 0, 2)
        assert ok(copy_bot, "POST", "import", doc_zh)["skipped"] == 2
        assert copy_bot.ltm_counts() == counts
        assert_unchanged(copy_bot, after)
        copy_bot.assert_log_clean()
    # The source bot is untouched by all this.
    assert fields(export_file(bot)[1]) == fields(everything)


SUMMARIES = {"write_policy": {"mode": "auto"}, "summaries": {"enable": True, "idle_minutes": 0.1, "min_events": 1}}


def test_a_session_summary_and_a_bot_side_episode_round_trip_unchanged(bot_factory):
    with bot_factory("dashboard-api-summaries", SUMMARIES) as source:
        # the bot recommends a book (an episode of the bot's), the user gives
        # a name (a profile); six idle seconds later the session is summarised
        opening = "我叫王芳，你能给我推荐一本书吗？"
        assert "《小王子》" in source.chat(opening, "wang", "sum-1")

        def learnt():
            items = source.items("wang")
            pending = [e for e in source.events("wang") if e["extraction_status"] == "pending"]
            kinds = {i["type"] for i in items if i["status"] == "active"}
            return not pending and {"summary", "episode", "profile"} <= kinds and items

        items = source.wait_for(learnt, 60, "wang's summary, the bot's episode and the name")
        (summary,) = [i for i in items if i["type"] == "summary"]
        (episode,) = [i for i in items if i["type"] == "episode"]
        assert opening in summary["fact"] and episode["fact"].startswith("机器人"), (summary, episode)
        settle(source)
        raw, doc = export_file(source, "?scope_id=webchat:wang")
        assert doc["count"] == len(items) and {i["type"] for i in doc["items"]} >= {"summary", "episode"}
        by_type = {i["type"]: i for i in doc["items"]}
        # the summary is backed by the person's line and the bot's reply; the episode by the reply
        assert {e["event"]["source_role"] for e in by_type["summary"]["evidence"]} == {"user", "assistant"}
        assert [e["event"]["source_role"] for e in by_type["episode"]["evidence"]] == ["assistant"]

    with bot_factory("dashboard-api-summaries-copy", SUMMARIES) as copy_bot:
        body, headers = multipart("file", "ltm-export.json", raw)
        assert ok(copy_bot, "POST", "import?dry_run=1", body, headers=headers)["added"] == doc["count"]
        report = ok(copy_bot, "POST", "import", body, headers=headers)
        assert (report["added"], report["merged"], report["skipped"]) == (doc["count"], 0, 0), report
        settle(copy_bot)
        _, copied = export_file(copy_bot, "?scope_id=webchat:wang")
        assert fields(copied) == fields(doc)
        assert evidence(copied) == evidence(doc)
        again = ok(copy_bot, "POST", "import", doc)
        assert (again["added"], again["merged"], again["skipped"]) == (0, 0, doc["count"]), again

        # the imported summary is the copy's "last time we talked"
        since = copy_bot.mark()
        hello = "你好，又是我"
        assert copy_bot.chat(hello, "wang", "sum-2") == f"ECHO: {hello}"
        (block,) = copy_bot.memory_blocks(copy_bot.turn_request(hello, since))
        assert block["lines"][0].startswith("上次聊天（") and opening in block["lines"][1], block["text"]
        # once that conversation is summarised, the imported turns were not summarised again
        imported = {e["event_id"] for i in doc["items"] for e in i["evidence"]}

        def summarised():
            found = [i for i in copy_bot.items("wang") if i["type"] == "summary"]
            return len(found) > 1 and found

        found = copy_bot.wait_for(summarised, 60, "the copy's own session summary")
        assert len(found) == 2 and found[0]["fact_key"] == summary["fact_key"], [i["fact"] for i in found]
        # a summary's events are linked in ltm_summary_links (two row ids), not ltm_evidence
        links = copy_bot.query("SELECT e.event_id FROM ltm_summary_links sl JOIN ltm_items i ON i.id = sl.item_id "
                               "JOIN ltm_events e ON e.id = sl.event_rowid WHERE i.memory_id = ?",
                               (found[1]["memory_id"],))
        assert links and not {r["event_id"] for r in links} & imported, (links, imported)
        copy_bot.assert_log_clean()


# -- policy ---------------------------------------------------------------------------------------


def plugin_config_file(bot) -> dict:
    return json.loads((bot.home / PLUGIN_CONFIG).read_text(encoding="utf-8-sig"))


def test_policy_put_persists_and_applies_without_restart(bot):
    pid = bot.pid
    before_file = plugin_config_file(bot)
    assert before_file["write_policy"]["mode"] == "shadow"
    # Invalid values: 400, and neither the file nor the running policy changes.
    for body in ({"write_policy": {"mode": "yolo"}}, {"read_policy": {"max_tokens": -1}},
                 {"emergency_read_only": "sometimes"}, {"write_policy": {"min_confidence": 2}}):
        refused(bot, 400, "PUT", "policy", body)
    assert plugin_config_file(bot) == before_file
    assert ok(bot, "GET", "policy")["write_policy"]["mode"] == "shadow"

    # Mode auto: saved to the plugin's config file, and the very next memory is active.
    policy = ok(bot, "PUT", "policy", {"write_policy": {"mode": "auto", "min_confidence": 0.5}})
    assert policy["write_policy"]["mode"] == "auto"
    saved = plugin_config_file(bot)
    assert saved["write_policy"]["mode"] == "auto" and saved["write_policy"]["min_confidence"] == 0.5
    assert saved["extraction"] == before_file["extraction"]  # the rest of the file is kept
    assert bot.get_plugin_config()["write_policy"]["mode"] == "auto"  # what the WebUI shows
    bot.chat("My name is Carol", "carol", "api-policy")
    (carol,) = bot.wait_extracted("carol", ["name is Carol"], "active")
    change = ok(bot, "GET", "audit?action=config")["entries"][0]
    assert change["actor"] == "operator:astrbot" and change["detail"]["changes"]["write_policy"][1]["mode"] == "auto"

    # Emergency read-only: saved, and writes stop at once (nothing recorded, edits refused).
    settle(bot)  # vectors written after the switch would be refused, and never come
    assert ok(bot, "POST", "policy", {"emergency_read_only": True}, prefix=LEGACY)["emergency_read_only"] is True
    assert plugin_config_file(bot)["emergency_read_only"] is True
    frozen = snapshot(bot)
    bot.chat("I live in Rome", "carol", "api-policy")
    assert "read_only" in refused(bot, 409, "PATCH", f"items/{carol['memory_id']}", {"importance": 0.1})
    refused(bot, 409, "POST", "items/review", {"memory_ids": [carol["memory_id"]], "decision": "reject"})
    refused(bot, 409, "POST", "import", make_export(1, "webchat:ro", "ro"))
    assert ok(bot, "GET", "stats")["emergency_read_only"] is True
    assert ok(bot, "GET", "items?scope_id=webchat:carol")["total"] == 1  # reading goes on
    assert_unchanged(bot, frozen)

    # And back: writes resume, still without a restart.
    ok(bot, "PUT", "policy", {"emergency_read_only": False, "write_policy": {"mode": "shadow", "min_confidence": 0.6}})
    assert plugin_config_file(bot)["emergency_read_only"] is False
    assert ok(bot, "PATCH", f"items/{carol['memory_id']}", {"importance": 0.1})["importance"] == 0.1
    assert bot.pid == pid  # the same AstrBot process all along
    bot.assert_log_clean()


# -- hostile input through AstrBot's own routes ---------------------------------------------------


def test_hostile_input_through_real_routes_gets_no_500_and_writes_nothing(bot):
    """A slice of tests/test_hostile_inputs.py's corpus through AstrBot's web
    layer: what AstrBot itself parses (JSON bodies, multipart) is included."""
    target = item_id(bot, "name is Alice")
    _, doc = export_file(bot, "?scope_id=webchat:alice")
    big_fact = copy.deepcopy(doc)
    big_fact["items"][0]["fact"] = "x" * 1_000_000
    control = copy.deepcopy(doc)
    control["items"][0]["fact"] = "alice\x00likes tea"
    for item in (*big_fact["items"], *control["items"]):
        item["checksum"] = checksum({k: v for k, v in item.items() if k != "checksum"})
    for changed in (big_fact, control):
        changed["checksum"] = checksum([i["checksum"] for i in changed["items"]])
    deep = b"[" * 100_000 + b"]" * 100_000
    broken_multipart = {"Content-Type": "multipart/form-data; boundary=nothing-here"}
    q = urllib.parse.quote
    inputs: list[tuple[str, str, object, dict | None]] = [
        *[("GET", f"items?{name}={q(value)}", None, None)
          for name in ("q", "scope_id", "page", "page_size", "min_confidence", "sort", "status")
          for value in ("%", "\x00", "NEAR(a b)", '"', "1e309", "9" * 400, "'; DROP TABLE ltm_items; --")],
        *[("GET", f"items/{q(value, safe='')}", None, None) for value in ("%%%%", "____", "\x00abc", "x" * 300)],
        *[("PATCH", f"items/{target}", body, None) for body in (
            {"ttl_days": 10**30}, {"ttl_days": 1e308}, {"importance": "NaN"}, {"fact": "x" * 1_000_000},
            {"fact": "a\x00b"}, {"type": []}, {"status": {}}, {"owner": "me"}, [1, 2], "text")],
        ("PATCH", f"items/{target}", b"{" * 50_000, None),
        ("POST", "items/review", deep, None),
        ("POST", "items/review", {"memory_ids": ["%%%%"], "decision": "reject"}, None),
        ("POST", "items/review", {"memory_ids": [target], "decision": "reject", "reason": []}, None),
        ("PUT", "policy", {"write_policy": {"max_writes_per_hour": 10**400}}, None),
        ("PUT", "policy", {"read_policy": {"enable": "perhaps"}}, None),
        ("PUT", "policy", deep, None),
        ("GET", f"events?session_id={q(chr(0))}", None, None),
        ("GET", f"audit?actor={q('x' * 400)}", None, None),
        ("GET", f"stats?scope=user&scope_id={q(chr(27) + '[2J')}", None, None),
        ("GET", "export?scope_id=%00", None, None),
        ("POST", "import", deep, None),
        ("POST", "import", b'{"format": NaN}', None),
        ("POST", "import", b"\xff\xfe", None),
        ("POST", "import", b"--nothing-here\r\ngarbage", broken_multipart),
        ("POST", "import/preview", b"--nothing-here\r\ngarbage", broken_multipart),
        ("POST", "import", big_fact, None),
        ("POST", "import?dry_run=perhaps", doc, None),
        ("POST", "import", control, None),
        ("POST", "import", {"status": "error", "message": "x"}, None),
    ]
    before = snapshot(bot)
    answers = []
    for method, route, body, headers in inputs:
        status, _, text = call(bot, method, route, body, headers=headers)
        answers.append((method, route[:60], status))
        assert status < 500, bot.diag(f"{method} {route[:80]}: {status} {text[:300]}")
        assert "Traceback" not in text and 'File "' not in text, text[:500]
    assert len(inputs) >= 60 and all(400 <= s < 500 or route.startswith(("items?", "events", "audit", "stats"))
                                     for _, route, s in answers), answers
    assert_unchanged(bot, before)
    bot.assert_log_clean()
