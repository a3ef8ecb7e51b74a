"""Nothing acknowledged is lost: AstrBot is SIGKILLed at random moments while
10 users send turns as fast as replies come back; after every restart each
turn whose reply the client had received is in ``ltm_events`` (the user's
message and the bot's reply, once each), and a recall and a new turn work.

Bounded: bursts of a few seconds until at least ``MIN_ACKNOWLEDGED`` turns
were acknowledged across at least ``MIN_KILLS`` kills, at most
``MAX_ROUNDS`` rounds. ``LTM_CRASH_SEED`` replays a run (the seed is printed).
"""

from __future__ import annotations

import json
import os
import random
import re
import signal
import threading
import time
from dataclasses import dataclass, field

import pytest

pytestmark = pytest.mark.e2e

USERS = 10
# Ten users get about 4 replies a second between them on a quiet machine (2026-12-07: 302 turns in 12 rounds,
# the same rate as before privacy and compact storage); a loaded CI machine acknowledged 171 in 16 rounds. The
# kills are the risk, so the test asks for many of them and enough turns around them, not a rate.
MIN_ACKNOWLEDGED = 150
MIN_KILLS = 8
MAX_ROUNDS = 24
BURST_SECONDS = (4.0, 10.0)  # the kill comes at a random moment in this range
RECALL_ATTEMPTS = 3  # a read waits at most 1 s for a cold namespace, then goes on without it
RECOVERED_RE = re.compile(r"ltm: (\d+) recorded event\(s\) recovered from the journal")


@dataclass
class Turn:
    user: str
    session: str
    text: str
    reply: str
    round: int
    acknowledged_at: float  # time.monotonic() when the reply arrived


@dataclass
class Burst:
    """Users chatting in threads until the bot dies under them."""

    bot: object
    round: int
    seed: int
    stop: threading.Event = field(default_factory=threading.Event)
    acknowledged: list[Turn] = field(default_factory=list)
    failed: int = 0  # requests cut off by the kill (no reply received)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def send(self, user: str, session: str, text: str) -> str | None:
        """One turn through the Open API; the reply as soon as it arrives
        (the acknowledgement), or None if the bot died first."""
        reply = None
        try:
            resp = self.bot.client.request(  # type: ignore[attr-defined]
                "POST", "/api/v1/chat",
                {"message": text, "username": user, "session_id": session, "enable_streaming": False},
                auth="key", raw=True, timeout=30)
            with resp:
                for raw in resp:
                    line = raw.decode(errors="replace").rstrip("\n")
                    if not line.startswith("data:"):
                        continue
                    try:
                        event = json.loads(line[5:].strip())
                    except json.JSONDecodeError:
                        continue
                    if (event.get("type") in ("plain", "complete") and isinstance(event.get("data"), str)
                            and event["data"].startswith("ECHO:")):
                        reply = event["data"]
                        with self.lock:
                            self.acknowledged.append(Turn(user, session, text, reply, self.round,
                                                          time.monotonic()))
                        return reply
        except Exception:
            pass
        if reply is None:
            with self.lock:
                self.failed += 1
        return reply

    def user_loop(self, k: int) -> None:
        user, session = f"crash-u{k}", f"crash-s{k}-r{self.round}"
        n = 0
        while not self.stop.is_set():
            n += 1
            text = f"round {self.round} turn {n}: my keepsake word is kw{self.seed}x{self.round}x{k}x{n}"
            if self.send(user, session, text) is None:
                return


def sigkill(bot) -> None:
    proc = bot.proc.proc
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait(30)
    assert proc.returncode == -signal.SIGKILL


def missing_turns(bot, turns: list[Turn]) -> list[str]:
    """Each acknowledged turn's two events, exactly once each."""
    stored: dict[tuple[str, str, str], int] = {}
    for row in bot.query("SELECT session_id, source_role, content FROM ltm_events WHERE source_type='message'"):
        text = json.loads(row["content"]).get("text", "")
        key = (row["session_id"], row["source_role"], text)
        stored[key] = stored.get(key, 0) + 1
    problems = []
    for turn in turns:
        umo = bot.umo(turn.user, turn.session)
        for role, text in (("user", turn.text), ("assistant", turn.reply)):
            count = stored.get((umo, role, text), 0)
            if count != 1:
                problems.append(f"{role} of {turn.text!r} (round {turn.round}) stored {count} times")
    return problems


def check_recall_and_write(bot, turn: Turn) -> int:
    """A new turn of the same user asking about an acknowledged turn's word:
    the memory block before the model call must bring that turn back (a
    read), and the new turn must be recorded (a write). Returns the attempt
    that recalled it."""
    word = turn.text.rsplit(" ", 1)[-1]
    for attempt in range(1, RECALL_ATTEMPTS + 1):
        question = f"check {attempt}: what was my keepsake word {word}?"
        mark = bot.mark()
        reply = bot.chat(question, turn.user, f"crash-check-{word}")
        assert reply == f"ECHO: {question}"
        blocks = bot.memory_blocks(bot.turn_request(question, mark))
        bot.wait_for(lambda q=question: [e for e in bot.events(turn.user) if e["content"].get("text") == q],
                     timeout=30, what=f"the new turn {question!r} in ltm_events")
        if any(word in line for block in blocks for line in block["lines"]):
            return attempt
    raise AssertionError(bot.diag(f"no recall of {word!r} after {RECALL_ATTEMPTS} turns: blocks {blocks}"))


@pytest.fixture(scope="module")
def bot(bot_factory):
    with bot_factory("crash", {"write_policy": {"mode": "auto"}}) as b:
        yield b


def test_no_acknowledged_turn_is_lost_across_random_sigkills(bot):
    seed = int(os.environ.get("LTM_CRASH_SEED") or random.SystemRandom().randrange(1, 10**6))
    print(f"\ncrash test seed: {seed} (LTM_CRASH_SEED={seed} replays the kill times)")
    rng = random.Random(seed)
    acknowledged: list[Turn] = []
    kills = recovered = 0
    started = time.monotonic()
    for round_ in range(1, MAX_ROUNDS + 1):
        if len(acknowledged) >= MIN_ACKNOWLEDGED and kills >= MIN_KILLS:
            break
        burst = Burst(bot, round_, seed)
        threads = [threading.Thread(target=burst.user_loop, args=(k,), daemon=True) for k in range(USERS)]
        for thread in threads:
            thread.start()
        time.sleep(rng.uniform(*BURST_SECONDS))
        sigkill(bot)
        killed_at = time.monotonic()
        kills += 1
        burst.stop.set()
        for thread in threads:
            thread.join(30)
        assert not any(t.is_alive() for t in threads), "a client thread is stuck"
        acknowledged += burst.acknowledged
        last_acks = sorted(killed_at - t.acknowledged_at for t in burst.acknowledged)[:3]

        log_start = bot.log_size()
        bot.start()  # also checks the plugin loaded and logged no error
        found = RECOVERED_RE.findall(bot.log_text(log_start))
        recovered += sum(int(n) for n in found)
        print(f"round {round_}: {len(burst.acknowledged)} acknowledged, {burst.failed} cut off; "
              f"replies closest to the kill arrived {[round(1000 * s) for s in last_acks]} ms before it; "
              f"{sum(int(n) for n in found)} events recovered from the journal at restart")

        # The replay ran in the plugin's initialize(), before bot.start() saw it activated.
        problems = missing_turns(bot, acknowledged)
        assert not problems, bot.diag(f"seed {seed}: {len(problems)} acknowledged events lost or doubled: "
                                      f"{problems[:10]}")
        if burst.acknowledged:
            latest = max(burst.acknowledged, key=lambda t: t.acknowledged_at)
            attempt = check_recall_and_write(bot, latest)
            print(f"round {round_}: recall of the last acknowledged turn on attempt {attempt}, new turn recorded")
    print(f"crash test: {len(acknowledged)} acknowledged turns, {kills} SIGKILLs, 0 lost, "
          f"{recovered} events recovered from journals, {time.monotonic() - started:.0f} s")
    assert kills >= MIN_KILLS
    assert len(acknowledged) >= MIN_ACKNOWLEDGED, f"only {len(acknowledged)} turns in {MAX_ROUNDS} rounds"
