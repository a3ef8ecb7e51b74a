"""Per-persona memory (``identity.persona_scoped``) against a real AstrBot:
two personas made through AstrBot's dashboard, each forced on a session by
AstrBot's own session rule. What the bot did while playing one persona is
not in the memory block of the other; what the user said about themselves
is in both."""

from __future__ import annotations

import pytest

pytestmark = pytest.mark.e2e

USER = "lilei"
PERSONA_A, PERSONA_B = "ltm-librarian", "ltm-chef"
PROMPTS = {PERSONA_A: "You are Lin, a librarian.", PERSONA_B: "You are Bo, a chef."}
# Two sessions under persona A (the second a new conversation), one under B.
SESSIONS = {"lib-1": PERSONA_A, "lib-2": PERSONA_A, "chef-1": PERSONA_B}


@pytest.fixture(scope="module")
def bot(bot_factory):
    config = {"write_policy": {"mode": "auto"}, "identity": {"persona_scoped": True},
              "extraction": {"timeout_seconds": 5.0}}
    with bot_factory("personas", config) as b:
        # AstrBot's dashboard routes (the legacy paths answer on 4.25 and 4.29 alike)
        for name, prompt in PROMPTS.items():
            answer = b.client.request("POST", "/api/persona/create", {"persona_id": name, "system_prompt": prompt})
            assert answer.get("status") == "ok", b.diag(f"creating persona {name} failed: {answer}")
        for session, persona in SESSIONS.items():
            answer = b.client.request("POST", "/api/session/update-rule", {
                "umo": b.umo(USER, session), "rule_key": "session_service_config",
                "rule_value": {"persona_id": persona}})
            assert answer.get("status") == "ok", b.diag(f"the session rule for {session} failed: {answer}")
        yield b


def _system(body: dict) -> str:
    return "\n".join(str(m.get("content")) for m in body["messages"] if m.get("role") == "system")


def _memories(bot, scope_id: str) -> list[dict]:
    return [dict(r) for r in bot.query(
        "SELECT type, fact, status FROM ltm_items WHERE scope='user' AND scope_id=? ORDER BY id", (scope_id,))]


def test_an_episode_learnt_under_one_persona_stays_with_it_and_the_profile_is_shared(bot):
    since = bot.mark()
    opening = "我叫李雷，最近想读书，你能给我推荐一本书吗？"
    assert "《小王子》" in bot.chat(opening, USER, "lib-1")
    # AstrBot played persona A for that turn (its prompt is in the request)
    assert PROMPTS[PERSONA_A] in _system(bot.turn_request(opening, since)), bot.diag("persona A was not applied")

    shared, own_a = f"webchat:{USER}", f"webchat:{USER}#persona:{PERSONA_A}"

    def learnt():
        pending = bot.query("SELECT count(*) AS n FROM ltm_events WHERE extraction_status = 'pending'")[0]["n"]
        episodes = [m for m in _memories(bot, own_a) if m["type"] == "episode" and "《小王子》" in m["fact"]]
        names = [m for m in _memories(bot, shared) if m["type"] == "profile" and "李雷" in m["fact"]]
        return not pending and episodes and names and (episodes, names)

    episodes, names = bot.wait_for(learnt, what="the episode in persona A's scope and the name in the shared one")
    assert all(m["status"] == "active" for m in episodes + names), (episodes, names)
    # the episode is persona A's alone; the name is nowhere but the shared scope
    assert not [m for m in _memories(bot, shared) if "《小王子》" in m["fact"]], _memories(bot, shared)
    assert not [m for m in _memories(bot, own_a) if "李雷" in m["fact"] and m["type"] == "profile"]

    # persona B, a new conversation: the name, not what persona A recommended
    since = bot.mark()
    question = "我叫什么名字？你上次推荐给我的书叫什么？"
    assert bot.chat(question, USER, "chef-1") == f"ECHO: {question}"
    body = bot.turn_request(question, since)
    assert PROMPTS[PERSONA_B] in _system(body), bot.diag("persona B was not applied")
    (block,) = bot.memory_blocks(body)
    assert "李雷" in block["text"], bot.diag(f"the shared profile is not in persona B's block: {block['text']}")
    assert "小王子" not in block["text"], bot.diag(f"persona A's episode leaked to persona B: {block['text']}")

    # persona A again, a new conversation: its own episode and the shared name
    since = bot.mark()
    assert bot.chat(question, USER, "lib-2") == f"ECHO: {question}"
    body = bot.turn_request(question, since)
    assert [m["role"] for m in body["messages"]] == ["system", "user"], body["messages"]
    (block,) = bot.memory_blocks(body)
    assert "《小王子》" in block["text"] and "李雷" in block["text"], bot.diag(f"persona A's block: {block['text']}")
    bot.assert_log_clean()
