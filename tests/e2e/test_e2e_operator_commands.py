"""Operator variants of the chat commands: an AstrBot admin lists and
forgets another user's memories by target; a plain user who names a target
is refused and nothing changes."""

from __future__ import annotations

import pytest

pytestmark = pytest.mark.e2e


@pytest.fixture(scope="module")
def bot(bot_factory):
    with bot_factory("operator", {"write_policy": {"mode": "auto"}}) as b:
        yield b


def test_admin_lists_and_forgets_another_users_memories_a_user_cannot(bot):
    said = "My name is Alice and I live in Paris"
    assert bot.chat(said, "alice", "op-alice") == f"ECHO: {said}"
    name, city = bot.wait_extracted("alice", ["name is Alice", "lives in Paris"], "active")
    answer = bot.chat("/ltm remember I like coffee", "bob", "op-bob")
    assert answer.startswith("Remembered ("), bot.diag(f"/ltm remember said: {answer!r}")
    bob_items = bot.items("bob")
    assert len(bob_items) == 1, bob_items
    target = "webchat:alice"  # alice's user scope, as a bare id
    # The background job embeds new memories and turns; let it finish so the
    # snapshot below only changes if a refused command changed something.
    before = bot.wait_for(lambda: bot.unembedded() == 0 and bot.ltm_counts(), what="everything embedded")

    # A plain user naming a target is refused; nothing is read or deleted.
    refused = bot.chat(f"/ltm list {target}", "bob", "op-bob")
    assert refused == "Only an operator can see other users' memories.", bot.diag(f"/ltm list said: {refused!r}")
    assert name["fact"] not in refused and city["fact"] not in refused
    refused = bot.chat(f"/ltm forget-all {target} confirm", "bob", "op-bob")
    assert refused == "Only an operator can delete other users' memories.", bot.diag(f"said: {refused!r}")
    assert bot.ltm_counts() == before, (before, bot.ltm_counts())

    # The admin sees them, by the bare id and by the kind-prefixed target.
    for shown_as in (target, f"user:{target}"):
        listed = bot.admin_chat(f"/ltm list {shown_as}", "op-admin")
        for item in (name, city):
            assert f"{item['memory_id'][:8]} [{item['type']}] {item['fact']}" in listed, bot.diag(
                f"/ltm list {shown_as} said: {listed!r}")
        assert "coffee" not in listed, listed

    # forget-all on the target asks first, then the admin's confirm deletes.
    asked = bot.admin_chat(f"/ltm forget-all {target}", "op-admin")
    assert asked == (
        f"This deletes all 2 memories of user:{target}, and nothing said before is quoted again. "
        f"Send /ltm forget-all user:{target} confirm within 2 minutes to go ahead."
    ), bot.diag(f"/ltm forget-all said: {asked!r}")
    assert len(bot.items("alice")) == 2
    done = bot.admin_chat(f"/ltm forget-all {target} confirm", "op-admin")
    assert done == f"Deleted 2 memories of user:{target}.", bot.diag(f"/ltm forget-all confirm said: {done!r}")

    assert bot.items("alice") == []
    assert [i["memory_id"] for i in bot.items("bob")] == [bob_items[0]["memory_id"]]
    tombs = bot.query("SELECT actor FROM ltm_tombstones WHERE scope='user' AND scope_id=?", (target,))
    assert sorted(r["actor"] for r in tombs) == ["operator:astrbot"] * 2, [tuple(r) for r in tombs]
    bot.assert_log_clean()


def test_hostile_command_arguments_are_answered_and_change_nothing(bot):
    """A slice of tests/test_hostile_inputs.py through AstrBot's own command
    parsing: wildcards, oversize text, control characters."""
    answer = bot.chat("/ltm remember I like green tea", "carol", "op-hostile")
    assert answer.startswith("Remembered ("), answer
    (tea,) = bot.items("carol")
    before = bot.wait_for(lambda: bot.unembedded() == 0 and bot.ltm_counts(), what="everything embedded")
    limit = 300  # extraction.max_fact_chars, the default
    as_user = [
        ("/ltm forget %%%%", "no memory %%%% here"),
        ("/ltm forget ____", "no memory ____ here"),
        (f"/ltm forget {tea['memory_id'][:4]}%", "no memory"),
        (f"/ltm forget {tea['memory_id'][:3]}_", "no memory"),
        ("/ltm forget %", "at least 4"),
        (f"/ltm remember I like {'x' * 5000}", "Not stored: fact is longer than"),
        (f"/ltm remember I like {'y' * limit}", "Not stored: fact is longer than"),
        ("/ltm remember I like \x07 bells", "control character"),
    ]
    as_admin = [
        ("/ltm forget %%%%", "no memory"),
        ("/ltm approve %%%%", "no memory"),
        ("/ltm reject ____", "no memory"),
        (f"/ltm list user:{'z' * 300}", "longer than"),
        (f"/ltm status group:{'z' * 300}", "longer than"),
        (f"/ltm forget-all {'z' * 300}", "longer than"),
        ("/ltm forget-all user:\x1b[2J", "control character"),
    ]
    for text, expected in as_user:
        said = bot.chat(text, "carol", "op-hostile")
        assert expected in said and "Sorry, that failed" not in said, bot.diag(f"{text[:40]!r} said {said!r}")
        assert len(said) < 500, said[:200]
    for text, expected in as_admin:
        said = bot.admin_chat(text, "op-hostile-admin")
        assert expected in said and "Sorry, that failed" not in said, bot.diag(f"{text[:40]!r} said {said!r}")
    assert bot.ltm_counts() == before, (before, bot.ltm_counts())
    assert [i["memory_id"] for i in bot.items("carol")] == [tea["memory_id"]]
    bot.assert_log_clean()
