#!/usr/bin/env python3
"""Records terminal-UI screens for tests/tui_screens.rs: runs a real program in a PTY of
40 rows x 120 columns, types into it, and at each named moment writes everything the program
has written so far (raw bytes, escape sequences included) to <out>/<agent>/<state>-<n>.txt.

    record.py fake   <kandev binary>          [out]
    record.py claude <claude binary>          [out]
    record.py codex  <codex binary>           [out]

Claude Code and Codex run with a private empty HOME (CODEX_HOME) in a scratch folder and every
proxy variable pointing at 127.0.0.1:9, so nothing leaves the machine; their model is a fake on
127.0.0.1 (below) that streams its answer slowly, so the working screen can be caught, and
answers a prompt containing PERMISSION with a shell tool call, so the permission question
shows. The program's queries of the terminal (cursor position, colours, device attributes)
are answered as a terminal would, with fixed values.
"""

import json
import os
import re
import select
import subprocess
import sys
import tempfile
import termios
import fcntl
import struct
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

ROWS, COLS = 40, 120
PROXY = "http://127.0.0.1:9"
ESCAPES = re.compile(rb"\x1b(\[[0-9;?<>=]*[ -/]*[@-~]|\][^\x07\x1b]*(\x07|\x1b\\)|[()][0-9A-Za-z]|.)")


class Pty:
    def __init__(self, argv, env, cwd):
        self.master, slave = os.openpty()
        fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", ROWS, COLS, 0, 0))
        self.proc = subprocess.Popen(
            argv, stdin=slave, stdout=slave, stderr=slave, env=env, cwd=cwd,
            start_new_session=True,
            preexec_fn=lambda: fcntl.ioctl(0, termios.TIOCSCTTY, 0),
        )
        os.close(slave)
        self.out = bytearray()
        self.mark = 0

    def pump(self, seconds):
        """Reads the program's output for `seconds`, answering its terminal queries."""
        end = time.time() + seconds
        while True:
            left = end - time.time()
            if left <= 0:
                return
            ready, _, _ = select.select([self.master], [], [], min(left, 0.05))
            if not ready:
                continue
            try:
                chunk = os.read(self.master, 65536)
            except OSError:
                return
            if not chunk:
                return
            self.out += chunk
            self.answer(chunk)

    def answer(self, chunk):
        replies = {
            b"\x1b[6n": b"\x1b[1;1R",
            b"\x1b[c": b"\x1b[?62;22c",
            b"\x1b[0c": b"\x1b[?62;22c",
            b"\x1b]10;?\x1b\\": b"\x1b]10;rgb:ffff/ffff/ffff\x1b\\",
            b"\x1b]11;?\x1b\\": b"\x1b]11;rgb:0000/0000/0000\x1b\\",
            b"\x1b]10;?\x07": b"\x1b]10;rgb:ffff/ffff/ffff\x07",
            b"\x1b]11;?\x07": b"\x1b]11;rgb:0000/0000/0000\x07",
            b"\x1b[?u": b"\x1b[?0u",
        }
        for query, reply in replies.items():
            for _ in range(chunk.count(query)):
                os.write(self.master, reply)

    def text_since_mark(self):
        """The output since the last `send`, escape sequences and spaces left out."""
        return re.sub(rb"\s", b"", ESCAPES.sub(b"", bytes(self.out[self.mark:]))).decode("utf-8", "replace")

    def wait_for(self, needle, timeout=30):
        """Pumps until `needle` (spaces ignored) was drawn since the last `send`."""
        needle = re.sub(r"\s", "", needle)
        end = time.time() + timeout
        while time.time() < end:
            if needle in self.text_since_mark():
                return True
            self.pump(0.1)
        print(f"  timed out waiting for {needle!r}; tail: {self.text_since_mark()[-400:]!r}", file=sys.stderr)
        return False

    def send(self, data, settle=0.3):
        """Types `data`; a final Enter comes after a pause (typed too fast, Codex takes the
        text for a paste and the Enter for a new line)."""
        self.mark = len(self.out)
        text, enter = (data[:-1], True) if data.endswith(b"\r") else (data, False)
        for byte in text:
            os.write(self.master, bytes([byte]))
            time.sleep(0.01)
        if enter:
            self.pump(0.5)
            os.write(self.master, b"\r")
        self.pump(settle)

    def stop(self):
        try:
            os.killpg(self.proc.pid, 9)
        except ProcessLookupError:
            pass
        self.proc.wait()


class Recorder:
    def __init__(self, out, agent):
        self.dir = os.path.join(out, agent)
        os.makedirs(self.dir, exist_ok=True)
        self.counts = {}

    def snap(self, pty, state, settle=0.5):
        pty.pump(settle)
        n = self.counts.get(state, 0) + 1
        self.counts[state] = n
        path = os.path.join(self.dir, f"{state}-{n}.txt")
        with open(path, "wb") as f:
            f.write(bytes(pty.out))
        print(f"  {path}: {len(pty.out)} bytes", file=sys.stderr)


# ---- a fake model: Anthropic Messages and OpenAI Responses, streamed slowly ----

def sse(events):
    return "".join(f"event: {e['type']}\ndata: {json.dumps(e)}\n\n" for e in events)


def last_user_text(items):
    for item in reversed(items or []):
        if item.get("role") != "user":
            continue
        content = item.get("content")
        if isinstance(content, str):
            return content, False
        texts = [p.get("text", "") for p in content or [] if isinstance(p, dict)]
        results = [p for p in content or [] if isinstance(p, dict) and p.get("type") == "tool_result"]
        return " ".join(texts), bool(results)
    return "", False


PIECES = ["Hello ", "from ", "the ", "slow ", "fake ", "model. ", "Still ", "writing ", "this ", "answer."]


class Model(BaseHTTPRequestHandler):
    delay = 0.8  # seconds between streamed pieces

    def log_message(self, *args):
        pass

    def stream(self, chunks):
        self.send_response(200)
        self.send_header("content-type", "text/event-stream")
        self.send_header("cache-control", "no-cache")
        self.end_headers()
        for chunk in chunks:
            self.wfile.write(chunk.encode())
            self.wfile.flush()

    def json(self, value, status=200):
        body = json.dumps(value).encode()
        self.send_response(status)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_GET(self):
        self.json({"object": "list", "data": [{"id": "fake-model", "object": "model"}], "models": []})

    def do_POST(self):
        body = json.loads(self.rfile.read(int(self.headers.get("content-length", 0))) or b"{}")
        path = self.path.split("?")[0]
        if path.endswith("/count_tokens"):
            return self.json({"input_tokens": 10})
        if path.endswith("/messages"):
            return self.anthropic(body)
        if path.endswith("/responses"):
            return self.openai_responses(body)
        self.json({"error": "not found"}, 404)

    def anthropic(self, body):
        text, after_tool = last_user_text(body.get("messages"))
        model = body.get("model", "fake-model")
        start = {"type": "message_start", "message": {"id": "msg_fake", "type": "message", "role": "assistant",
                 "model": model, "content": [], "stop_reason": None, "stop_sequence": None,
                 "usage": {"input_tokens": 10, "output_tokens": 1}}}
        tools = [t.get("name") for t in body.get("tools") or []]
        if "PERMISSION" in text and not after_tool and "Bash" in tools:
            call = {"command": "touch notes.txt", "description": "Create notes.txt"}
            events = [start,
                      {"type": "content_block_start", "index": 0,
                       "content_block": {"type": "tool_use", "id": "toolu_fake", "name": "Bash", "input": {}}},
                      {"type": "content_block_delta", "index": 0,
                       "delta": {"type": "input_json_delta", "partial_json": json.dumps(call)}},
                      {"type": "content_block_stop", "index": 0},
                      {"type": "message_delta", "delta": {"stop_reason": "tool_use", "stop_sequence": None},
                       "usage": {"output_tokens": 5}},
                      {"type": "message_stop"}]
            return self.stream([sse(events)])
        if not body.get("stream"):
            return self.json({"id": "msg_fake", "type": "message", "role": "assistant", "model": model,
                              "content": [{"type": "text", "text": "Fake title"}], "stop_reason": "end_turn",
                              "stop_sequence": None, "usage": {"input_tokens": 10, "output_tokens": 5}})
        head = [start, {"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}}]
        tail = [{"type": "content_block_stop", "index": 0},
                {"type": "message_delta", "delta": {"stop_reason": "end_turn", "stop_sequence": None},
                 "usage": {"output_tokens": 5}},
                {"type": "message_stop"}]
        self.stream(self.slowly(head, [{"type": "content_block_delta", "index": 0,
                                        "delta": {"type": "text_delta", "text": p}} for p in PIECES], tail))

    def slowly(self, head, pieces, tail):
        yield sse(head)
        time.sleep(3)  # thinking before the first token: the working screen without text
        for piece in pieces:
            time.sleep(self.delay)
            yield sse([piece])
        yield sse(tail)

    def openai_responses(self, body):
        items = body.get("input") or []
        text, _ = last_user_text(items)
        after_tool = any(i.get("type") == "function_call_output" for i in items[-3:] if isinstance(i, dict))
        model = body.get("model", "fake-model")
        usage = {"input_tokens": 10, "input_tokens_details": {"cached_tokens": 0}, "output_tokens": 5,
                 "output_tokens_details": {"reasoning_tokens": 0}, "total_tokens": 15}

        def response(status, output, usage=None):
            return {"id": "resp_fake", "object": "response", "created_at": 0, "model": model,
                    "status": status, "output": output, "usage": usage}

        created = {"type": "response.created", "response": response("in_progress", [])}
        tools = {t.get("name"): t for t in body.get("tools") or [] if isinstance(t, dict)}
        if "PERMISSION" in text and not after_tool:
            if "shell_command" in tools:
                name, args = "shell_command", {"command": "touch notes.txt"}
            elif "exec_command" in tools:
                name, args = "exec_command", {"cmd": "touch notes.txt"}
            else:
                name, args = "shell", {"command": ["bash", "-lc", "touch notes.txt"]}
            # Asking to leave the sandbox is what makes `on-request` ask the user.
            args.update({"sandbox_permissions": "require_escalated",
                         "justification": "Create notes.txt for the test"})
            item = {"type": "function_call", "id": "fc_fake", "call_id": "call_fake", "name": name,
                    "arguments": json.dumps(args), "status": "completed"}
            events = [created,
                      {"type": "response.output_item.added", "output_index": 0, "item": item},
                      {"type": "response.output_item.done", "output_index": 0, "item": item},
                      {"type": "response.completed", "response": response("completed", [item], usage)}]
            return self.stream([sse(events)])
        reply = "".join(PIECES)
        part = {"type": "output_text", "text": reply, "annotations": []}
        item = {"type": "message", "id": "msg_fake", "role": "assistant", "status": "completed", "content": [part]}
        head = [created,
                {"type": "response.output_item.added", "output_index": 0,
                 "item": {"type": "message", "id": "msg_fake", "role": "assistant", "status": "in_progress",
                          "content": []}},
                {"type": "response.content_part.added", "item_id": "msg_fake", "output_index": 0,
                 "content_index": 0, "part": {"type": "output_text", "text": "", "annotations": []}}]
        pieces = [{"type": "response.output_text.delta", "item_id": "msg_fake", "output_index": 0,
                   "content_index": 0, "delta": p} for p in PIECES]
        tail = [{"type": "response.output_text.done", "item_id": "msg_fake", "output_index": 0,
                 "content_index": 0, "text": reply},
                {"type": "response.content_part.done", "item_id": "msg_fake", "output_index": 0,
                 "content_index": 0, "part": part},
                {"type": "response.output_item.done", "output_index": 0, "item": item},
                {"type": "response.completed", "response": response("completed", [item], usage)}]
        self.stream(self.slowly(head, pieces, tail))


def start_model():
    server = ThreadingHTTPServer(("127.0.0.1", 0), Model)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return f"http://127.0.0.1:{server.server_address[1]}"


def private_env(home):
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": home, "TERM": "xterm-256color",
           "LANG": "C.UTF-8", "COLORTERM": "truecolor"}
    for name in ["HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY"]:
        env[name] = env[name.lower()] = PROXY
    env["NO_PROXY"] = env["no_proxy"] = "127.0.0.1,localhost"
    return env


# ---- the scenarios ----

def record_fake(binary, out):
    rec = Recorder(out, "fake")
    scratch = tempfile.mkdtemp(prefix="tuirec-fake-")
    pty = Pty([binary, "fake-tui", "--work-ms", "3000"], private_env(scratch), scratch)
    try:
        pty.wait_for("Ctrl-D quits")
        rec.snap(pty, "waiting")
        pty.send(b"hello there\r")
        pty.wait_for("esc to interrupt")
        rec.snap(pty, "working")
        pty.wait_for("echo: hello there", 10)
        rec.snap(pty, "waiting")
        pty.send(b"write the notes #permission\r")
        pty.wait_for("Enter 1 or 2")
        rec.snap(pty, "permission")
        pty.send(b"2\r")
        pty.wait_for("denied")
        rec.snap(pty, "waiting")
    finally:
        pty.stop()


def record_claude(binary, out):
    rec = Recorder(out, "claude")
    scratch = tempfile.mkdtemp(prefix="tuirec-claude-")
    home, work = os.path.join(scratch, "home"), os.path.join(scratch, "work")
    os.makedirs(home)
    os.makedirs(work)
    url = start_model()
    key = "sk-ant-fake-key-for-kandev-recording-000"
    env = private_env(home)
    env.update({
        "ANTHROPIC_BASE_URL": url, "ANTHROPIC_API_KEY": key, "ANTHROPIC_MODEL": "fake-model",
        "ANTHROPIC_DEFAULT_HAIKU_MODEL": "fake-model", "ANTHROPIC_DEFAULT_SONNET_MODEL": "fake-model",
        "ANTHROPIC_DEFAULT_OPUS_MODEL": "fake-model", "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
        "DISABLE_TELEMETRY": "1", "DISABLE_ERROR_REPORTING": "1", "DISABLE_AUTOUPDATER": "1",
    })
    if os.environ.get("CLAUDE_ONBOARDING") != "1":
        # What Claude Code writes itself once its first-run questions are answered: the theme
        # chosen, this key approved, this folder trusted.
        with open(os.path.join(home, ".claude.json"), "w") as f:
            json.dump({"hasCompletedOnboarding": True, "theme": "dark",
                       "customApiKeyResponses": {"approved": [key[-20:]], "rejected": []},
                       "projects": {work: {"hasTrustDialogAccepted": True}}}, f)
    # Auto mode (the default) would run the tool without asking; `default` asks.
    pty = Pty([binary, "--permission-mode", "default"], env, work)
    try:
        if os.environ.get("CLAUDE_ONBOARDING") == "1":
            pty.pump(8)
            rec.snap(pty, "unknown")
            return
        pty.wait_for("for shortcuts", 40)
        rec.snap(pty, "waiting", 1.5)
        pty.send(b"Say hello\r")
        pty.wait_for("esc to interrupt", 20)
        rec.snap(pty, "working", 0.5)
        pty.wait_for("answer.", 30)
        rec.snap(pty, "waiting", 1.5)
        pty.send(b"Please PERMISSION touch the notes\r")
        pty.wait_for("Do you want to", 30)
        rec.snap(pty, "permission", 1.0)
    finally:
        pty.stop()


def record_codex(binary, out):
    rec = Recorder(out, "codex")
    scratch = tempfile.mkdtemp(prefix="tuirec-codex-")
    home, work = os.path.join(scratch, "home"), os.path.join(scratch, "work")
    codex_home = os.path.join(home, ".codex")
    os.makedirs(codex_home)
    os.makedirs(work)
    subprocess.run(["git", "init", "-q", work], check=True)
    url = start_model()
    with open(os.path.join(codex_home, "config.toml"), "w") as f:
        f.write(f'''model = "fake-model"
model_provider = "fake"
approval_policy = "on-request"
sandbox_mode = "read-only"
check_for_update_on_startup = false

[model_providers.fake]
name = "Kandev fake model"
base_url = "{url}/v1"
env_key = "KANDEV_FAKE_API_KEY"
wire_api = "responses"
request_max_retries = 0
stream_max_retries = 0
supports_websockets = false

[projects."{work}"]
trust_level = "trusted"
''')
    env = private_env(home)
    env.update({"CODEX_HOME": codex_home, "KANDEV_FAKE_API_KEY": "fake-key"})
    pty = Pty([binary], env, work)
    try:
        pty.wait_for("for shortcuts", 30)
        rec.snap(pty, "waiting", 5)  # Codex drops an Enter typed while it still starts up
        pty.send(b"Say hello\r")
        pty.wait_for("esc to interrupt", 20)
        rec.snap(pty, "working", 0.5)
        pty.wait_for("answer.", 30)
        rec.snap(pty, "waiting", 1.5)
        pty.send(b"Please PERMISSION touch the notes\r")
        pty.wait_for("Would you like to", 30)
        rec.snap(pty, "permission", 1.0)
    finally:
        pty.stop()


if __name__ == "__main__":
    agent, binary = sys.argv[1], sys.argv[2]
    out = sys.argv[3] if len(sys.argv) > 3 else os.path.dirname(os.path.abspath(__file__))
    {"fake": record_fake, "claude": record_claude, "codex": record_codex}[agent](binary, out)
