"""A fake OpenAI-compatible model server (standard library only).

- ``POST /v1/chat/completions``, plain and streaming (SSE). Chat turns are
  answered ``ECHO: <user text>`` (the tests' default), or, with
  ``State(answers="memory")`` (the offline demo) or ``POST /_control``
  {"answers": "memory"}, like a model that reads the memory block it is
  given: a question is answered with the remembered facts that share its
  words ("我住在哪里？" → "我记得：小明住在杭州。"), anything else acknowledged.
  Memory-extraction calls (recognised by the
  plugin's extraction system prompt) are answered by a small rule-based
  extractor, so the offline demo really learns "my name is …", "I live in …",
  "我叫…", "住在…", "I like …", the README's "我养了一只猫，叫咪咪",
  "我是一名程序员", "从上海搬到了杭州", and what the bot itself recommended ("by": "bot").
  AstrBot's title requests get a fixed title. Asked for a book ("推荐…书",
  "recommend … book"), the model recommends one; asked for restaurants, it
  answers with a long list of eight.
- A user message containing "weather" is answered with a call to the
  ``get_weather`` tool when the request offers it; ``call <tool> {json}``
  with a call to that tool with those arguments, when it is offered.
- A run AstrBot's scheduler woke (a cron job: its JSON follows "The
  following object describes the scheduled task that triggered you:", in
  the system prompt before 4.29, in the user prompt since) is answered
  with a call to ``send_message_to_user`` saying ``CRON: <the job's note>``
  when the tool is offered (AstrBot offers it when the job names a session).
- ``POST /v1/embeddings``: deterministic bag-of-words vectors.
- ``POST /v1/rerank`` (vLLM's rerank API, which AstrBot's ``vllm_rerank``
  provider calls): each document scored by the share of the query's words
  it holds, plus 1 when it holds the word ``POST /_control``
  {"rerank_prefers": word} names; {"rerank": "error"} answers 500.
- ``GET /_requests`` lists every request received; ``POST /_reset`` clears it.
- ``POST /_control`` {"extraction": "rules"|"unmarked"|"error"|"timeout"|"malformed",
  "timeout_seconds": N, "delay_seconds": N, "error_status": N} makes
  extraction calls fail on purpose (``error_status``, default 500, is the
  HTTP status of "error" answers: AstrBot retries 5xx for about 15 s, a 4xx
  fails at once; ``delay_seconds`` slows down successful answers).
  ``unmarked`` answers like a smaller model: the same facts, never marking
  ``updates``/``same_as``, with prose and a code fence around the JSON.

Every server has a ``State`` (``server.state``); ``serve(port, state=State())``
gives a server its own recorded requests and controls, ``STATE`` is the
shared default. ``request_kind()`` tells chat turns from extraction and
title calls.

Run it alone: ``python -m devtools.fake_openai PORT``.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import math
import re
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

EXTRACTION_MARKER = "You extract long-term memory"
# learning/summary_prompt.py: SESSION_MARK, ROLLUP_MARK
SUMMARY_MARKERS = ("You summarise one past conversation", "You merge summaries of conversations")
EMBED_DIM = 64
_LINE = re.compile(r"^\[(\d+)\] (?P<who>.+?) \(user id (?P<uid>[^)]*)\): (?P<text>.*)$")
_RULES = [
    (re.compile(r"\bmy name is ([A-Z][\w-]*)", re.I), "profile", "{who}'s name is {0}", "name", 0.95, 0.9),
    (re.compile(r"\bI live in ([A-Z][\w -]*?)(?:[.,!]|\s+and\b|$)", re.I),
     "profile", "{who} lives in {0}", "home_city", 0.9, 0.8),
    (re.compile(r"\bI(?: have|'ve)? moved to ([A-Z][\w-]*(?: [A-Z][\w-]*)*)"),
     "profile", "{who} lives in {0}", "home_city", 0.9, 0.8),
    (re.compile(r"\bI (?:really )?(?:like|love|prefer) ([^.,!]+)", re.I),
     "preference", "{who} likes {0}", "likes_{0}", 0.85, 0.6),
    (re.compile(r"我叫([\u4e00-\u9fff\w]{1,8}?)(?:[，,。！!\s]|$)"), "profile", "{who}的名字是{0}", "name", 0.95, 0.9),
    (re.compile(r"住在([\u4e00-\u9fff\w]{1,10}?)(?:[，,。！!\s]|$)"), "profile", "{who}住在{0}", "home_city", 0.9, 0.8),
    (re.compile(r"我(?:很)?喜欢([\u4e00-\u9fff\w]{1,12}?)(?:[，,。！!\s]|$)"),
     "preference", "{who}喜欢{0}", "likes_{0}", 0.85, 0.6),
    # The README's examples: a pet with its name, a job, a move (the new city updates the old one).
    (re.compile(r"我养了(一(?:只|条|个|头)[\u4e00-\u9fff]{1,3}[，,]\s*(?:它)?叫[\u4e00-\u9fff\w]{1,8}?)(?:[。！!\s]|$)"),
     "profile", "{who}养了{0}", "pet", 0.9, 0.7),
    (re.compile(r"我是一(?:名|位|个)([\u4e00-\u9fff\w]{1,10}?)(?:[，,。！!\s]|$)"),
     "profile", "{who}是一名{0}", "job", 0.9, 0.7),
    (re.compile(r"搬到了?([\u4e00-\u9fff]{1,10}?)(?:[，,。！!\s]|$)"),
     "profile", "{who}住在{0}", "home_city", 0.9, 0.8),
    (re.compile(r"\bI have an? ((?:cat|dog|rabbit|parrot|hamster) (?:named|called) [A-Z][\w-]*)", re.I),
     "profile", "{who} has a {0}", "pet", 0.9, 0.7),
    (re.compile(r"\bI(?: am|'m) an? (programmer|developer|engineer|teacher|doctor|nurse|student|designer|writer)\b",
                re.I), "profile", "{who} is a {0}", "job", 0.9, 0.7),
    # What someone asks to keep secret: the model marks it (_SECRET below).
    (re.compile(r"我的秘密代号是\s*([A-Za-z0-9-]+)"), "profile", "{who}的秘密代号是{0}", "secret_code", 0.9, 0.8),
    (re.compile(r"我的卡号是\s*([0-9 -]{6,})"), "profile", "{who}的卡号是{0}", "card_number", 0.9, 0.8),
    (re.compile(r"\bmy secret code is ([A-Za-z0-9-]+)", re.I), "profile", "{who}'s secret code is {0}", "secret_code",
     0.9, 0.8),
    # An unsure guess a real model makes of a request (below the write
    # policy's 0.6: kept in shadow, no one asked to approve it).
    (re.compile(r"推荐几家([\u4e00-\u9fff]{1,6}?)的餐厅"),
     "preference", "{who}想找{0}的餐厅", "wants_food_{0}", 0.5, 0.3),
    (re.compile(r"recommend some restaurants in ([A-Z][\w-]*)", re.I),
     "preference", "{who} is looking for restaurants in {0}", "wants_food_{0}", 0.5, 0.3),
]


# A line asking to keep it to ourselves: the fact is marked "secret".
_SECRET = re.compile(r"别告诉别人|不要告诉别人|保密|don't tell anyone|keep it secret", re.I)
# A group's own rule, said in a group chat: "about": "group".
_GROUP_RULE = (re.compile(r"本群规定[：:，,]?\s*(.+?)[。！!]?$"),
               re.compile(r"\bthe group rule is:?\s*(.+?)[.!]?$", re.I))


class State:
    def __init__(self, answers: str = "echo") -> None:
        self.lock = threading.Lock()
        self.requests: list[dict] = []
        self.extraction = "rules"
        self.timeout_seconds = 30.0
        self.delay_seconds = 0.0
        self.error_status = 500
        self.rerank = "ok"
        self.rerank_prefers = ""
        self.answers = answers  # "echo" (the tests'), or "memory": answer from the memory block (the demo's)

    def snapshot(self) -> list[dict]:
        with self.lock:
            return list(self.requests)


STATE = State()


_KNOWN = re.compile(r"^\[(K\d+)\] key=(\S+): (.*?)(?: \(since [\d-]+\))?$")
_NAME_GIVEN = (re.compile(r"\bmy name is ([A-Z][\w-]*)", re.I),
               re.compile(r"我叫([\u4e00-\u9fff\w]{1,8}?)(?:[，,。！!\s]|$)"),
               re.compile(r"(?:的名字是|'s name is )([\u4e00-\u9fff\w-]{1,16})"))
_CALL = re.compile(r"^call (\w+) (\{.*\})$", re.S)
# AstrBot's cron wake-up: the job as one line of JSON (astr_main_agent_resources.py).
_CRON_JOB = re.compile(r"The following object describes the scheduled task that triggered you:\n(\{.*\})")
CRON_MARKER = "awakened by a scheduled cron job"
CRON_SAYS = "CRON: "
# A request for a book (not a question about an earlier one), and the bot's
# recommendation as extraction reads it back: a bot-side episode.
_ASKS_BOOK = re.compile(r"推荐.*书|recommend.*book", re.I)
_ASKS_BACK = re.compile(r"上次|之前|last time|earlier|before", re.I)
# Asked for restaurants, the model answers at length, as real models do: a
# list of eight, the detail a later question asks about in its middle.
_ASKS_RESTAURANTS = re.compile(r"推荐.*餐厅|recommend.*restaurants", re.I)
RESTAURANTS_ZH = (
    "当然可以！杭州有很多值得一去的餐厅，下面给你推荐八家：\n"
    "1. 知味观：百年老店，招牌是小笼包和猫耳朵，适合早餐和点心。\n"
    "2. 外婆家：性价比很高的杭帮菜连锁店，茶香鸡和麻婆豆腐很受欢迎。\n"
    "3. 绿茶餐厅：环境清新，面包诱惑和绿茶烤鸡是必点菜。\n"
    "4. 楼外楼：位于孤山脚下，西湖醋鱼和东坡肉是这里的招牌，历史悠久。\n"
    "5. 新白鹿：价格实惠，排队的人很多，蛋黄鸡翅值得一试。\n"
    "6. 奎元馆：以面条闻名，虾爆鳝面是经典，适合想吃面的时候去。\n"
    "7. 山外山：靠近植物园，环境优雅，适合家庭聚餐和朋友聚会。\n"
    "8. 天外天：在灵隐寺附近，龙井虾仁做得很地道，游玩后可以顺路去。\n"
    "希望你在杭州吃得开心！如果需要，我还可以帮你规划一条美食路线。"
)
RESTAURANTS_EN = (
    "Of course! Lisbon has a lot of great places to eat. Here are eight I would recommend:\n"
    "1. Time Out Market: a big food hall by the river, good when everyone wants something different.\n"
    "2. Taberna da Rua das Flores: a tiny tavern with a chalkboard menu of small Portuguese plates.\n"
    "3. Pastéis de Belém: the original custard tarts, best eaten warm with cinnamon on top.\n"
    "4. Cervejaria Ramiro: a loud seafood hall famous for its garlic prawns and a steak sandwich to finish.\n"
    "5. A Cevicheria: Peruvian ceviche under a giant octopus hanging from the ceiling.\n"
    "6. Zé da Mouraria: huge portions of codfish, so bring friends and share.\n"
    "7. Belcanto: two Michelin stars, a tasting menu for a special evening.\n"
    "8. O Trevo: a simple counter that serves the bifana, a pork sandwich locals swear by.\n"
    "Enjoy your trip, and tell me if you would like a route that links them together!"
)
_BOT_LINE = re.compile(r"^\[(\d+)\] assistant: (?P<text>.*)$")
_BOT_RECOMMENDS = re.compile(r"推荐你读(《[^》]+》)|I recommend reading ([^,.!]+)")
UNNAMED = "unnamed user"  # learning.extractor.UNNAMED: the speaker has no display name


def rule_extract(transcript: str, marks: bool = True) -> list[dict]:
    """Facts by the rules above, as a faithful model would write them: a
    speaker with no display name is called by the name they gave (in the
    transcript or a known fact), and a fact whose key is a known fact's
    marks it as updated (another value) or repeated (the same)."""
    known = {m.group(2): (m.group(1), m.group(3)) for m in map(_KNOWN.match, transcript.splitlines()) if m}
    given = {}
    for text in [fact for _, fact in known.values()] + transcript.splitlines():
        for pattern in _NAME_GIVEN:
            found = pattern.search(text)
            if found:
                given["any"] = found.group(1)
    facts = []
    person = given.get("any", "the user")
    group_chat = "Chat: a group chat." in transcript
    for line in transcript.splitlines():
        bot = _BOT_LINE.match(line.strip())
        if bot and (rec := _BOT_RECOMMENDS.search(bot.group("text"))):
            title = rec.group(1) or rec.group(2).strip()
            zh = person if person != "the user" else "用户"
            act = f"机器人向{zh}推荐了{title}" if rec.group(1) else f"the bot recommended {title} to {person}"
            facts.append({"type": "episode", "fact": act, "fact_key": f"bot_recommended_{title}", "by": "bot",
                          "confidence": 0.9, "importance": 0.6, "lines": [int(bot.group(1))]})
        m = _LINE.match(line.strip())
        if not m:
            continue
        person = m.group("who") if m.group("who") != UNNAMED else given.get("any", "the user")
        who, uid, text = m.group("who"), m.group("uid"), m.group("text")
        if who == UNNAMED:
            who = given.get("any", "the user")
        for rule in _GROUP_RULE:
            if group_chat and (found := rule.search(text)):
                facts.append({"type": "constraint", "fact": f"本群规定：{found.group(1)}" if "本群" in text
                              else f"The group rule is: {found.group(1)}", "fact_key": f"group_rule_{found.group(1)}",
                              "confidence": 0.9, "importance": 0.7, "lines": [int(m.group(1))], "about": "group"})
        for pattern, mtype, template, key, conf, imp in _RULES:
            for found in pattern.finditer(text):
                value = found.group(1).strip()
                fact = {
                    "type": mtype,
                    "fact": template.format(value, who=who),
                    "fact_key": f"{uid}_{key.format(value)}",
                    "confidence": conf,
                    "importance": imp,
                    "lines": [int(m.group(1))],
                }
                if marks and fact["fact_key"] in known:
                    ref, old = known[fact["fact_key"]]
                    fact["same_as" if old == fact["fact"] else "updates"] = ref
                if _SECRET.search(text):
                    fact["secret"] = True
                facts.append(fact)
    return facts


# The block the plugin injects (recalling/block.py: HEADER, FOOTER, format_line).
_BLOCK = re.compile(r"\[Long-term Memory\]\n(.*?)\n\[End Memory\]", re.S)
_MEMORY_LINE = re.compile(r"^- \[[a-z_]+[^\]]*\] (?P<fact>.+?) \(confidence: [0-9.]+\)(?: #\d+)?$")
_ASKS = re.compile(r"[?？]|吗|什么|哪|谁|几|多少|记得|知道|\b(what|where|who|which|when|how|do you|remember|know)\b",
                   re.I)
# Words a question is made of, not what it is about.
_QUESTION_CHARS = set("我你他她它的了吗呢吧啊呀是在有什么么哪里儿谁几多少怎样记得知道还一个不请问")
_QUESTION_WORDS = {"what", "where", "who", "which", "when", "how", "do", "does", "did", "you", "i", "my", "me", "is",
                   "are", "am", "the", "a", "an", "remember", "know", "about", "tell", "can", "your"}
_ALSO = {"叫": "名字"}  # "我叫什么？" asks for the name


def _cjk(text: str) -> bool:
    return bool(re.search(r"[\u4e00-\u9fff]", text))


def _topic(text: str, question: bool = False) -> set[str]:
    """What a text is about: its Chinese characters and English word stems, question words left out."""
    chars = {ch for ch in text if _cjk(ch) and ch not in _QUESTION_CHARS}
    for ch, more in _ALSO.items() if question else ():
        if ch in text:
            chars |= set(more)
    words = {w.rstrip("s") for w in re.findall(r"[a-z]+", text.lower()) if w not in _QUESTION_WORDS}
    return chars | words


def answer_from_memory(messages: list[dict], own: str) -> str:
    """A reply as a model that reads the memory block would give: a question
    answered with the remembered facts that share the most of its words
    (those about the person when it names none), anything else acknowledged."""
    given = "\n".join(_text(m.get("content")) for m in messages)
    facts = [m.group("fact") for block in _BLOCK.findall(given) for m in map(_MEMORY_LINE.match, block.splitlines())
             if m]
    zh = _cjk(own)
    if not _ASKS.search(own):
        return "好的，知道了。" if zh else "Got it."
    wanted = _topic(own, question=True)
    scored = [(len(wanted & _topic(fact)), fact) for fact in facts]
    best = max((n for n, _ in scored), default=0)
    chosen = [fact for n, fact in scored if n == best][:3] if best else facts[:4]
    if not chosen:
        return "我还不知道呢。告诉我吧，我会记住。" if zh else "I don't know yet. Tell me, and I will remember."
    return ("我记得：" + "；".join(chosen) + "。") if zh else ("I remember: " + "; ".join(chosen) + ".")


def fake_summary(prompt: str) -> str:
    """A summary that only repeats what was said: the transcript's (or the
    parts') lines after the heading, without their time or number, who
    said each in words."""
    lines = [re.sub(r"^\[[^\]]*\]\s*", "", line) for line in prompt.splitlines()[1:]]
    # In prose, as a model writes: "assistant:" would read as a role marker (instructions.py).
    lines = [re.sub(r"^assistant: ", "the bot replied ", re.sub(r"^(.+?) \(user id [^)]*\): ", r"\1 said ", line))
             for line in lines]
    return ("Summary: " + "; ".join(line for line in lines if line))[:600]


def embed(text: str) -> list[float]:
    vec = [0.0] * EMBED_DIM
    for token in re.findall(r"\w+", text.lower()):
        h = int(hashlib.md5(token.encode()).hexdigest(), 16)
        vec[h % EMBED_DIM] += 1.0
    norm = math.sqrt(sum(v * v for v in vec)) or 1.0
    return [v / norm for v in vec]


def rerank(query: str, documents: list, prefers: str = "") -> list[dict]:
    """vLLM's rerank answer: the documents best first, by index and score."""
    asked = set(re.findall(r"\w+", query.lower()))
    scores = [len(asked & set(re.findall(r"\w+", str(d).lower()))) / (len(asked) or 1)
              + (1.0 if prefers and prefers.lower() in str(d).lower() else 0.0) for d in documents]
    order = sorted(range(len(documents)), key=lambda i: -scores[i])
    return [{"index": i, "relevance_score": scores[i]} for i in order]


def _text(content) -> str:
    if isinstance(content, list):
        return " ".join(p.get("text", "") for p in content if isinstance(p, dict) and p.get("type") == "text")
    return str(content or "")


def _last(messages: list[dict], role: str) -> dict | None:
    return next((m for m in reversed(messages) if m.get("role") == role), None)


def cron_job(messages: list[dict]) -> dict | None:
    """The cron job that woke this run (its JSON in AstrBot's prompt), if any."""
    for message in messages:
        found = _CRON_JOB.search(_text(message.get("content")))
        if found:
            with contextlib.suppress(json.JSONDecodeError):
                job = json.loads(found.group(1))
                return job if isinstance(job, dict) else None
    return None


def request_kind(request: dict) -> str:
    """``chat`` (a turn AstrBot sent for a user), ``extraction``, ``title``,
    ``summary``, ``cron`` (a run a cron job woke), ``embedding`` or ``other``
    for one entry of ``State.requests``."""
    path = request.get("path", "")
    if path.endswith("/embeddings"):
        return "embedding"
    if not path.endswith("/chat/completions"):
        return "other"
    messages = (request.get("body") or {}).get("messages") or []
    system = " ".join(_text(m.get("content")) for m in messages if m.get("role") == "system")
    if EXTRACTION_MARKER in system:
        return "extraction"
    if any(marker in system for marker in SUMMARY_MARKERS):
        return "summary"
    if "conversation title generator" in system:
        return "title"
    if CRON_MARKER in system:
        return "cron"
    return "chat"


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *args) -> None:
        pass

    @property
    def state(self) -> State:
        return getattr(self.server, "state", STATE)

    def handle(self) -> None:
        # The client may give up (e.g. a timed-out extraction call).
        with contextlib.suppress(BrokenPipeError, ConnectionResetError):
            super().handle()

    def _json(self, obj, code: int = 200) -> None:
        data = json.dumps(obj, ensure_ascii=False).encode()
        self.send_response(code)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_GET(self) -> None:
        if self.path == "/_requests":
            with self.state.lock:
                return self._json(self.state.requests)
        if self.path.rstrip("/").endswith("/models"):
            return self._json({"object": "list", "data": [{"id": "fake-model", "object": "model"}]})
        self._json({"error": "not found"}, 404)

    def do_POST(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        body = json.loads(self.rfile.read(length) or b"{}")
        state = self.state
        if self.path == "/_reset":
            with state.lock:
                state.requests.clear()
            return self._json({"ok": True})
        if self.path == "/_control":
            with state.lock:
                state.extraction = body.get("extraction", state.extraction)
                state.timeout_seconds = float(body.get("timeout_seconds", state.timeout_seconds))
                state.delay_seconds = float(body.get("delay_seconds", state.delay_seconds))
                state.error_status = int(body.get("error_status", state.error_status))
                state.rerank = body.get("rerank", state.rerank)
                state.rerank_prefers = body.get("rerank_prefers", state.rerank_prefers)
                state.answers = body.get("answers", state.answers)
            return self._json({"ok": True, "extraction": state.extraction,
                               "timeout_seconds": state.timeout_seconds,
                               "delay_seconds": state.delay_seconds,
                               "error_status": state.error_status})
        with state.lock:
            state.requests.append({"path": self.path, "body": body, "time": time.time()})
        if self.path.endswith("/embeddings"):
            inputs = body.get("input")
            inputs = inputs if isinstance(inputs, list) else [inputs]
            data = [{"object": "embedding", "index": i, "embedding": embed(str(s))} for i, s in enumerate(inputs)]
            return self._json({"object": "list", "data": data, "model": body.get("model"),
                               "usage": {"prompt_tokens": 1, "total_tokens": 1}})
        if self.path.endswith("/rerank"):
            if state.rerank == "error":
                return self._json({"error": "rerank failed on purpose"}, 500)
            return self._json({"results": rerank(str(body.get("query", "")), list(body.get("documents") or []),
                                                 state.rerank_prefers)})
        if self.path.endswith("/chat/completions"):
            return self._chat(body)
        self._json({"error": "not found"}, 404)

    def _chat(self, body: dict) -> None:
        messages = body.get("messages", [])
        system = _text((_last(messages, "system") or {}).get("content"))
        user = _text((_last(messages, "user") or {}).get("content"))
        tool_calls = None
        if EXTRACTION_MARKER in system:
            state = self.state
            mode = state.extraction
            if mode == "error":
                kind = "server_error" if state.error_status >= 500 else "invalid_request_error"
                return self._json({"error": {"message": "fake outage", "type": kind}}, state.error_status)
            if mode == "timeout":
                time.sleep(state.timeout_seconds)
            elif state.delay_seconds > 0:
                time.sleep(state.delay_seconds)
            if mode == "malformed":
                text = "this is not JSON"
            elif mode == "unmarked":
                facts = json.dumps(rule_extract(user, marks=False), ensure_ascii=False, indent=2)
                text = f"Here are the facts I found:\n```json\n{facts}\n```\nLet me know if you need more."
            else:
                text = json.dumps(rule_extract(user), ensure_ascii=False)
        elif any(marker in system for marker in SUMMARY_MARKERS):
            text = json.dumps({"summary": fake_summary(user)}, ensure_ascii=False)
        elif "conversation title generator" in system:
            text = "Fake Title"
        else:
            last = messages[-1] if messages else {}
            tools = [t.get("function", {}).get("name") for t in body.get("tools") or []]
            # The user's own words (the last text part), not context a plugin put before them.
            content = (_last(messages, "user") or {}).get("content")
            own = user
            if isinstance(content, list):
                texts = [p.get("text", "") for p in content if isinstance(p, dict) and p.get("type") == "text"]
                own = texts[-1] if texts else ""
            if last.get("role") == "tool":
                text = f"The tool said: {_text(last.get('content'))}"
            elif (job := cron_job(messages)) is not None:
                said = CRON_SAYS + str(job.get("note") or "")
                text = said
                if "send_message_to_user" in tools:
                    text = ""
                    arguments = {"messages": [{"type": "plain", "text": said}]}
                    tool_calls = [{"id": "call_fake_cron", "type": "function",
                                   "function": {"name": "send_message_to_user",
                                                "arguments": json.dumps(arguments, ensure_ascii=False)}}]
            elif (called := _CALL.match(own.strip())) and called.group(1) in tools:
                text = ""  # "call memory_search {...}": the model calls that tool with those arguments
                tool_calls = [{"id": "call_fake_2", "type": "function",
                               "function": {"name": called.group(1), "arguments": called.group(2)}}]
            elif "weather" in user.lower() and "get_weather" in tools:
                text = ""
                tool_calls = [{"id": "call_fake_1", "type": "function",
                               "function": {"name": "get_weather", "arguments": json.dumps({"city": "Paris"})}}]
            elif _ASKS_RESTAURANTS.search(own) and not _ASKS_BACK.search(own):
                text = RESTAURANTS_ZH if re.search(r"[\u4e00-\u9fff]", own) else RESTAURANTS_EN
            elif _ASKS_BOOK.search(own) and not _ASKS_BACK.search(own):
                text = ("我推荐你读《小王子》，一本温暖又深刻的书。" if re.search(r"[\u4e00-\u9fff]", own)
                        else "I recommend reading The Little Prince, a gentle classic.")
            elif self.state.answers == "memory":
                text = answer_from_memory(messages, own)
            else:
                text = "ECHO: " + own
        self._answer(body, text, tool_calls)

    def _answer(self, body: dict, text: str, tool_calls) -> None:
        model, cid, now = body.get("model", "fake-model"), "chatcmpl-fake", int(time.time())
        usage = {"prompt_tokens": 5, "completion_tokens": 5, "total_tokens": 10}
        finish = "tool_calls" if tool_calls else "stop"
        if not body.get("stream"):
            message = {"role": "assistant", "content": text or None}
            if tool_calls:
                message["tool_calls"] = tool_calls
            return self._json({"id": cid, "object": "chat.completion", "created": now, "model": model,
                               "choices": [{"index": 0, "finish_reason": finish, "message": message}],
                               "usage": usage})
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Cache-Control", "no-cache")
        self.send_header("Connection", "close")
        self.end_headers()

        def chunk(delta: dict, finish_reason=None, with_usage=False) -> None:
            data = {"id": cid, "object": "chat.completion.chunk", "created": now, "model": model,
                    "choices": [{"index": 0, "delta": delta, "finish_reason": finish_reason}]}
            if with_usage:
                data["usage"] = usage
            self.wfile.write(f"data: {json.dumps(data, ensure_ascii=False)}\n\n".encode())
            self.wfile.flush()

        chunk({"role": "assistant", "content": ""})
        if tool_calls:
            chunk({"tool_calls": [{"index": 0, **tool_calls[0]}]})
        for i in range(0, len(text), 8):
            chunk({"content": text[i:i + 8]})
        chunk({}, finish, with_usage=True)
        self.wfile.write(b"data: [DONE]\n\n")
        self.wfile.flush()
        self.close_connection = True


class _Server(ThreadingHTTPServer):
    state: State


def serve(port: int = 0, state: State | None = None) -> ThreadingHTTPServer:
    """Start in a background thread; ``server.server_address[1]`` is the port.

    ``state`` (default: the shared ``STATE``) holds the requests this server
    records and its controls; it is also ``server.state``.
    """
    server = _Server(("127.0.0.1", port), Handler)
    server.state = state if state is not None else STATE
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, daemon=True, name="fake-openai").start()
    return server


if __name__ == "__main__":
    port = int(sys.argv[1]) if len(sys.argv) > 1 else 18080
    server = ThreadingHTTPServer(("127.0.0.1", port), Handler)
    print(f"fake OpenAI-compatible model on http://127.0.0.1:{port}/v1", flush=True)
    server.serve_forever()
