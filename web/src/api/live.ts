// Live notifications over `/ws`: one connection per page, topics subscribed by components,
// reconnection by itself with `since` = the last seq seen per topic, so nothing is missed and
// duplicates (seq <= last seen) are dropped. When the server cannot replay a topic (its log was
// pruned past our `since`, or we fell too far behind: `resync_required`, lifecycle rule 47),
// the topic is subscribed again from now and its subscribers reload their objects. After a
// reconnect too, once the topic's subscription is confirmed again (the replay is in), its
// subscribers reload, which also covers a server whose log was reset.
// Components do not use this directly: `useLiveQuery` (../lib/useLiveQuery.ts) does.
import type { Frame, Notification, RequestFrame, SocketActions } from './types';

export type ConnectionStatus = 'connecting' | 'open' | 'reconnecting';
type Handler = (n: Notification) => void;
/** Why a subscriber reads its objects afresh. */
export type ReloadReason = 'reconnect' | 'resync';
/** Reloads a subscriber's objects once the topic's subscription is confirmed again. */
type Reload = (reason: ReloadReason) => void;

/** A subscriber's hold on a topic. */
export interface Subscription {
  /**
   * Resolves once the server confirmed the current subscription (after its replay): read
   * then, and every later change arrives. Renewed while the connection is down.
   */
  readonly ready: Promise<void>;
  close: () => void;
}

interface Topic {
  lastSeq: number | null;
  handlers: Set<Handler>;
  reloads: Set<Reload>;
  /** Resolves when the server confirmed the subscription (after its replay). */
  ready: Promise<void>;
  resolveReady: () => void;
  confirmed: boolean;
  /**
   * Reload the subscribers once the subscription is confirmed again: after a reconnect (the
   * topic was live before the connection dropped), or after `resync_required`.
   */
  reloadOnConfirm: ReloadReason | null;
}

const MAX_BACKOFF_MS = 2000;

/** The close code of a socket whose access ended (kandev-server `ws::ACCESS_ENDED`). */
const ACCESS_ENDED = 4401;

class Live {
  private ws: WebSocket | null = null;
  private topics = new Map<string, Topic>();
  private pending = new Map<string, string[]>();
  private nextId = 1;
  private backoff = 150;
  private statusListeners = new Set<(s: ConnectionStatus) => void>();
  private everOpened = false;
  status: ConnectionStatus = 'connecting';

  private ensure(): void {
    if (this.ws) return;
    const scheme = location.protocol === 'https:' ? 'wss' : 'ws';
    const ws = new WebSocket(`${scheme}://${location.host}/ws`);
    this.ws = ws;
    ws.onopen = () => {
      this.backoff = 150;
      this.everOpened = true;
      this.setStatus('open');
      const all = [...this.topics.keys()];
      if (all.length > 0) this.sendSubscribe(all);
    };
    ws.onmessage = (event) => this.onFrame(String(event.data));
    ws.onclose = (event) => {
      this.ws = null;
      if (event.code === ACCESS_ENDED) {
        // A logout elsewhere, a revoked token, a removed user or a changed password: the
        // server closed this socket; log in again (reconnecting would only be refused).
        window.location.assign('/login');
        return;
      }
      for (const t of this.topics.values()) {
        if (!t.confirmed) continue;
        t.confirmed = false;
        t.reloadOnConfirm ??= 'reconnect';
        t.ready = new Promise((r) => (t.resolveReady = r));
      }
      this.setStatus(this.everOpened ? 'reconnecting' : 'connecting');
      const delay = this.backoff;
      this.backoff = Math.min(MAX_BACKOFF_MS, this.backoff * 2);
      window.setTimeout(() => this.ensure(), delay);
    };
  }

  private setStatus(status: ConnectionStatus): void {
    this.status = status;
    this.statusListeners.forEach((l) => l(status));
  }

  private sendSubscribe(topics: string[]): void {
    if (!this.ws || this.ws.readyState !== WebSocket.OPEN) return;
    const since: Record<string, number> = {};
    for (const name of topics) {
      const seq = this.topics.get(name)?.lastSeq;
      if (seq != null) since[name] = seq;
    }
    const id = `s${this.nextId++}`;
    this.pending.set(id, topics);
    const frame: RequestFrame = { id, type: 'request', action: 'subscribe', payload: { topics, since } };
    this.ws.send(JSON.stringify(frame));
  }

  private onFrame(data: string): void {
    let frame: Frame;
    try {
      // The server sends only frames of `Frame` (generated from the Rust `Frame` enum).
      frame = JSON.parse(data);
    } catch {
      return; // not a frame of the protocol (the server sends only JSON): nothing to act on
    }
    if (frame.type === 'notification') {
      const topic = this.topics.get(frame.topic);
      if (!topic) return;
      if (topic.lastSeq != null && frame.seq <= topic.lastSeq) return; // duplicate
      topic.lastSeq = frame.seq;
      topic.handlers.forEach((h) => h(frame));
      return;
    }
    if (frame.type === 'resync_required') {
      // The server no longer follows this topic for us and cannot replay what we missed:
      // follow it again from now, then let its subscribers reload (see `confirm`).
      const topic = this.topics.get(frame.topic);
      if (!topic) return;
      topic.lastSeq = null;
      topic.reloadOnConfirm = 'resync';
      if (topic.confirmed) {
        topic.confirmed = false;
        topic.ready = new Promise((r) => (topic.resolveReady = r));
      }
      this.sendSubscribe([frame.topic]);
      return;
    }
    if ((frame.type === 'response' || frame.type === 'error') && typeof frame.id === 'string' && this.pending.has(frame.id)) {
      const names = this.pending.get(frame.id) ?? [];
      this.pending.delete(frame.id);
      const last: SocketActions['subscribe']['response']['topics'] =
        frame.type === 'response' && frame.action === 'subscribe' ? frame.payload.topics : {};
      for (const name of names) {
        const topic = this.topics.get(name);
        if (!topic) continue;
        const seq = last[name];
        // A topic missing from a successful answer was told `resync_required`: its own
        // subscription, sent then, confirms it.
        if (frame.type === 'response' && typeof seq !== 'number') continue;
        if (typeof seq === 'number' && (topic.lastSeq == null || seq > topic.lastSeq)) {
          topic.lastSeq = seq;
        }
        this.confirm(topic);
      }
    }
  }

  private confirm(topic: Topic): void {
    topic.confirmed = true;
    topic.resolveReady();
    const reason = topic.reloadOnConfirm;
    if (reason) {
      topic.reloadOnConfirm = null;
      topic.reloads.forEach((r) => r(reason));
    }
  }

  /**
   * Follows `topic`. The returned promise resolves once the server confirmed the subscription,
   * so a caller can then read the current state and rely on getting every later change.
   * `reload` is called when the subscription is confirmed again after a reconnect (the missed
   * notifications were replayed, then the caller reads afresh) or after the server could not
   * replay what this page missed (`resync_required`: the topic is followed again from now);
   * either way the caller reads its objects afresh, as on first load.
   */
  subscribe(name: string, handler: Handler, reload?: Reload): Subscription {
    this.ensure();
    let topic = this.topics.get(name);
    if (!topic) {
      let resolveReady: () => void = () => {};
      const ready = new Promise<void>((r) => (resolveReady = r));
      topic = {
        lastSeq: null,
        handlers: new Set(),
        reloads: new Set(),
        ready,
        resolveReady,
        confirmed: false,
        reloadOnConfirm: null,
      };
      this.topics.set(name, topic);
      this.sendSubscribe([name]);
    }
    topic.handlers.add(handler);
    if (reload) topic.reloads.add(reload);
    const t = topic;
    return {
      get ready() {
        return t.ready;
      },
      close: () => {
        t.handlers.delete(handler);
        if (reload) t.reloads.delete(reload);
        if (t.handlers.size === 0) {
          this.topics.delete(name);
          if (this.ws?.readyState === WebSocket.OPEN) {
            const payload: SocketActions['unsubscribe']['request'] = { topics: [name] };
            this.ws.send(JSON.stringify({ id: `u${this.nextId++}`, type: 'request', action: 'unsubscribe', payload }));
          }
        }
      },
    };
  }

  onStatus(listener: (s: ConnectionStatus) => void): () => void {
    this.statusListeners.add(listener);
    return () => this.statusListeners.delete(listener);
  }
}

export const live = new Live();
