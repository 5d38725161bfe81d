// A terminal's stream over `/ws` (docs/api.md, "Terminal frames"): its own connection, which
// sends `terminal.attach` and then gets the terminal's kept output (the replay) followed by
// what comes live, as binary frames `[kind][id length][id][payload]`. Typed input and resizes
// go back the same way. A dropped connection reconnects by itself and attaches again; the
// replay then redraws the screen from the start, so the caller resets it (`onReplay`).
// Input typed before the connection is attached (just opened, or reconnecting) is kept, up
// to `MAX_PENDING_INPUT` bytes, and sent once it is: keystrokes are not dropped.

import type { Frame, RequestFrame } from '../api/types';

const INPUT = 0x01;
const RESIZE = 0x02;
const OUTPUT = 0x81;
const EXIT = 0x83;

const MAX_BACKOFF_MS = 2000;
/** Typed input kept while not attached; more than this (a paste into a dead link) is dropped. */
export const MAX_PENDING_INPUT = 64 * 1024;

export interface TerminalExit {
  exit_code: number | null;
  signal: string | null;
}

export interface TerminalHandlers {
  /** The terminal's output: the replay first, then live. */
  onOutput: (data: Uint8Array) => void;
  /** Attached (again): the output that follows starts from the oldest byte kept. */
  onReplay: () => void;
  onExit: (exit: TerminalExit) => void;
  /** The terminal cannot be attached (closed, or never existed). */
  onError: (message: string) => void;
}

export interface TerminalSocket {
  input: (data: string) => void;
  resize: (cols: number, rows: number) => void;
  close: () => void;
}

const encoder = new TextEncoder();

function encode(kind: number, id: string, payload: Uint8Array): Uint8Array {
  const idBytes = encoder.encode(id);
  const frame = new Uint8Array(2 + idBytes.length + payload.length);
  frame[0] = kind;
  frame[1] = idBytes.length;
  frame.set(idBytes, 2);
  frame.set(payload, 2 + idBytes.length);
  return frame;
}

export function connectTerminal(id: string, handlers: TerminalHandlers): TerminalSocket {
  let ws: WebSocket | null = null;
  let closed = false;
  let exited = false;
  let backoff = 150;
  let size: [number, number] | null = null;
  // The connection whose `terminal.attach` was answered; frames go only to it.
  let attached: WebSocket | null = null;
  let pending: Uint8Array[] = [];
  let pendingBytes = 0;

  const send = (frame: Uint8Array) => {
    if (attached && attached === ws && ws.readyState === WebSocket.OPEN) ws.send(frame);
  };
  const sendInput = (data: string) => {
    const frame = encode(INPUT, id, encoder.encode(data));
    if (attached && attached === ws && ws.readyState === WebSocket.OPEN) {
      ws.send(frame);
    } else if (!closed && !exited && pendingBytes + frame.length <= MAX_PENDING_INPUT) {
      pending.push(frame);
      pendingBytes += frame.length;
    }
  };
  const flushInput = () => {
    const frames = pending;
    pending = [];
    pendingBytes = 0;
    for (const frame of frames) send(frame);
  };
  const sendSize = () => {
    if (!size) return;
    const payload = new Uint8Array(4);
    new DataView(payload.buffer).setUint16(0, size[0]);
    new DataView(payload.buffer).setUint16(2, size[1]);
    send(encode(RESIZE, id, payload));
  };

  const open = () => {
    if (closed) return;
    const scheme = location.protocol === 'https:' ? 'wss' : 'ws';
    const socket = new WebSocket(`${scheme}://${location.host}/ws`);
    socket.binaryType = 'arraybuffer';
    ws = socket;
    socket.onopen = () => {
      backoff = 150;
      const attach: RequestFrame = { id: 'attach', type: 'request', action: 'terminal.attach', payload: { terminal_id: id } };
      socket.send(JSON.stringify(attach));
    };
    socket.onmessage = (event) => {
      if (typeof event.data === 'string') {
        let frame: Frame;
        try {
          frame = JSON.parse(event.data);
        } catch {
          return;
        }
        if (frame.type !== 'response' && frame.type !== 'error') return;
        if (frame.id !== 'attach') return;
        if (frame.type === 'response') {
          attached = socket;
          handlers.onReplay();
          sendSize();
          flushInput();
        } else if (frame.type === 'error') {
          closed = true;
          pending = [];
          handlers.onError(frame.payload?.message || 'the terminal cannot be attached');
          socket.close();
        }
        return;
      }
      const bytes = new Uint8Array(event.data as ArrayBuffer);
      if (bytes.length < 2) return;
      const payload = bytes.subarray(2 + bytes[1]!);
      if (bytes[0] === OUTPUT) handlers.onOutput(payload);
      if (bytes[0] === EXIT) {
        exited = true;
        try {
          handlers.onExit(JSON.parse(new TextDecoder().decode(payload)) as TerminalExit);
        } catch {
          handlers.onExit({ exit_code: null, signal: null });
        }
      }
    };
    socket.onclose = () => {
      if (attached === socket) attached = null;
      if (ws === socket) ws = null;
      if (closed || exited) return;
      const delay = backoff;
      backoff = Math.min(MAX_BACKOFF_MS, backoff * 2);
      window.setTimeout(open, delay);
    };
  };
  open();

  return {
    input: sendInput,
    resize: (cols, rows) => {
      size = [cols, rows];
      sendSize();
    },
    close: () => {
      closed = true;
      ws?.close();
    },
  };
}
