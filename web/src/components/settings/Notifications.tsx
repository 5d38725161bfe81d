// Settings › Notifications: this browser's sound and system notifications, the channels that
// carry notification records out (webhook, ntfy: add, test, delete) and their delivery log,
// live on the `notifications` topic.
import { useState } from 'react';
import { call } from '../../api/client';
import type {
  ChannelDto,
  ChannelKindDto,
  DeliveryDto,
  Notification as Frame,
  NotificationKindDto,
} from '../../api/types';
import { playChime, useSoundSetting } from '../../lib/notify';
import { useLiveQuery } from '../../lib/useLiveQuery';
import { useRead } from '../../lib/useRead';
import { InlineError } from '../ErrorBanner';
import { useFormError } from './useFormError';

const KINDS: [NotificationKindDto, string][] = [
  ['permission_requested', 'Permission requested'],
  ['question_asked', 'Question asked'],
  ['turn_completed', 'Turn completed'],
  ['session_failed', 'Session failed'],
  ['pr_state_changed', 'Pull request changed'],
];
const KIND_LABEL = Object.fromEntries(KINDS) as Record<NotificationKindDto, string>;

const readChannels = () => call('notification.channel.list', {}).then((r) => r.channels);

export function Notifications() {
  // `null` until the first read answers; a failed read shows its error with Retry.
  const list = useRead(readChannels);
  const channels = list.data;
  return (
    <section>
      <h1>Notifications</h1>
      <BrowserSettings />
      <h2>Channels</h2>
      <p className="hint">
        Each event that needs you is sent to the channels that take its kind: a webhook gets the record as JSON (signed
        with <code>x-kandev-signature</code> when it has a secret), ntfy gets the title. Failed deliveries are retried for
        24 hours.
      </p>
      <InlineError error={list.error} onRetry={list.retry} testId="channels-error" />
      <ChannelTable channels={channels} readFailed={list.error !== null} onChange={list.retry} />
      <AddChannel onAdded={list.retry} />
      <DeliveryLog channels={channels ?? []} />
    </section>
  );
}

function BrowserSettings() {
  const [sound, setSound] = useSoundSetting();
  return (
    <div className="form card-form" aria-label="This browser">
      <h2>This browser</h2>
      <label className="check">
        <input type="checkbox" checked={sound} onChange={(e) => setSound(e.target.checked)} /> Play a sound when an agent
        needs you while this tab is in the background
      </label>
      <div className="actions">
        <button type="button" onClick={playChime}>
          Play the sound
        </button>
      </div>
      <p className="hint">
        Off by default. While the tab is in the background, its title counts what arrived (“(2 new) Kandev”) and, when
        allowed, a system notification opens the task.
      </p>
    </div>
  );
}

/** `channels`: `null` until the first read answers (not "none": it may have failed). */
function ChannelTable(props: { channels: ChannelDto[] | null; readFailed: boolean; onChange: () => void }) {
  const { channels, readFailed, onChange } = props;
  const { wrap, view } = useFormError();
  const [tested, setTested] = useState<Record<string, string>>({});
  if (channels === null) return readFailed ? null : <p className="column-empty">Reading the channels…</p>;
  if (!channels.length) return <p className="column-empty">No channels yet.</p>;
  return (
    <>
      {view}
      <table className="table" aria-label="Notification channels">
        <thead>
          <tr>
            <th>Kind</th>
            <th>Receiver</th>
            <th>Events</th>
            <th>Signed</th>
            <th />
          </tr>
        </thead>
        <tbody>
          {channels.map((c) => (
            <tr key={c.id} data-channel-id={c.id}>
              <td>{c.kind}</td>
              <td>
                <code>{c.url_origin}</code>
              </td>
              <td>{c.events.map((k) => KIND_LABEL[k] ?? k).join(', ')}</td>
              <td>{c.has_secret ? 'yes' : 'no'}</td>
              <td className="row-actions">
                {tested[c.id] && (
                  <span className="hint" data-testid="channel-test-result">
                    {tested[c.id]}
                  </span>
                )}
                <button
                  onClick={() =>
                    void wrap(async () => {
                      const r = await call('notification.channel.test', { id: c.id });
                      const text = r.delivered
                        ? `Test delivered (${r.http_status ?? 'ok'})`
                        : `Test failed: ${r.error ?? 'no answer'}`;
                      setTested((t) => ({ ...t, [c.id]: text }));
                    })
                  }
                >
                  Test
                </button>
                <button
                  className="danger-outline"
                  onClick={() =>
                    void wrap(async () => {
                      await call('notification.channel.delete', { id: c.id });
                      onChange();
                    })
                  }
                >
                  Delete
                </button>
              </td>
            </tr>
          ))}
        </tbody>
      </table>
    </>
  );
}

function AddChannel({ onAdded }: { onAdded: () => void }) {
  const [kind, setKind] = useState<ChannelKindDto>('webhook');
  const [url, setUrl] = useState('');
  const [secret, setSecret] = useState('');
  const [events, setEvents] = useState<NotificationKindDto[]>(['permission_requested', 'question_asked']);
  const { wrap, view } = useFormError();
  return (
    <form
      className="form card-form"
      aria-label="Add channel"
      onSubmit={async (e) => {
        e.preventDefault();
        const ok = await wrap(() =>
          call('notification.channel.create', {
            kind,
            url,
            events,
            secret: kind === 'webhook' && secret ? secret : undefined,
          }),
        );
        if (ok) {
          setUrl('');
          setSecret('');
          onAdded();
        }
      }}
    >
      <h2>Add a channel</h2>
      <div className="row">
        <label>
          Kind
          <select value={kind} onChange={(e) => setKind(e.target.value as ChannelKindDto)}>
            <option value="webhook">Webhook</option>
            <option value="ntfy">ntfy</option>
          </select>
        </label>
        <label>
          URL <span className="hint">kept secret: only its origin is shown again</span>
          <input
            value={url}
            onChange={(e) => setUrl(e.target.value)}
            required
            placeholder={kind === 'ntfy' ? 'https://ntfy.sh/my-topic' : 'https://example.com/hook'}
          />
        </label>
      </div>
      {kind === 'webhook' && (
        <label>
          Secret <span className="hint">optional: signs each body (HMAC-SHA256)</span>
          <input type="password" value={secret} onChange={(e) => setSecret(e.target.value)} autoComplete="off" />
        </label>
      )}
      <fieldset>
        <legend>Events</legend>
        {KINDS.map(([k, label]) => (
          <label key={k} className="check">
            <input
              type="checkbox"
              checked={events.includes(k)}
              onChange={(e) => setEvents((now) => (e.target.checked ? [...now, k] : now.filter((x) => x !== k)))}
            />{' '}
            {label}
          </label>
        ))}
      </fieldset>
      {view}
      <div className="actions">
        <button className="primary" type="submit">
          Add channel
        </button>
      </div>
    </form>
  );
}

const loadDeliveries = async () => (await call('notification.delivery.list', { limit: 100 })).deliveries;
const applyDelivery = (list: DeliveryDto[], n: Frame) => {
  if (n.topic !== 'notifications' || n.action !== 'notification.delivery.updated') return list;
  const d = n.payload.delivery;
  const rest = list.filter((x) => x.id !== d.id);
  return [d, ...rest].sort((a, b) => b.id - a.id).slice(0, 100);
};

/** The newest deliveries with every attempt, live (`notification.delivery.updated`). */
function DeliveryLog({ channels }: { channels: ChannelDto[] }) {
  const q = useLiveQuery('notifications', loadDeliveries, applyDelivery);
  const origin = (id: string) => channels.find((c) => c.id === id)?.url_origin ?? 'deleted channel';
  const deliveries = q.data ?? [];
  return (
    <>
      <h2>Delivery log</h2>
      {!deliveries.length ? (
        <p className="column-empty">{q.loading ? 'Loading…' : 'Nothing delivered yet.'}</p>
      ) : (
        <table className="table" aria-label="Delivery log">
          <thead>
            <tr>
              <th>Channel</th>
              <th>Status</th>
              <th>Attempts</th>
            </tr>
          </thead>
          <tbody>
            {deliveries.map((d) => (
              <tr key={d.id} data-status={d.status}>
                <td>
                  <code>{origin(d.channel_id)}</code>
                </td>
                <td>
                  {d.status}
                  {d.next_at && <span className="hint"> · next try {new Date(d.next_at).toLocaleTimeString()}</span>}
                </td>
                <td>
                  <ol className="attempts">
                    {d.attempts.map((a) => (
                      <li key={a.attempt}>
                        {new Date(a.at).toLocaleTimeString()} · {a.http_status ?? '—'}
                        {a.error ? ` · ${a.error}` : ''}
                      </li>
                    ))}
                  </ol>
                </td>
              </tr>
            ))}
          </tbody>
        </table>
      )}
    </>
  );
}
