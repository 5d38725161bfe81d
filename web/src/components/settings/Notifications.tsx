// Settings › Notifications: this browser's sound and system notifications, the channels that
// carry notification records out (webhook, ntfy: add, test with the receiver's answer, edit,
// delete; a webhook signs with a secret typed here or a stored server secret named here, issue
// 50) and their delivery log (event, task, attempts, Retry now), live on the
// `notifications` topic. Channels and their log are for an admin (of some workspace: channels
// are shared by every workspace, issue 49); others have this browser's settings.
import { Fragment, useId, useState } from 'react';
import { call } from '../../api/client';
import type {
  ChannelDto,
  ChannelKindDto,
  DeliveryDto,
  Notification as Frame,
  NotificationKindDto,
} from '../../api/types';
import { serverSecretNames, signedLabel, signingCreate, signingForm, signingUpdate } from '../../lib/channelSigning';
import type { SigningSource } from '../../lib/channelSigning';
import { useRole } from '../../lib/me';
import { playChime, useSoundSetting } from '../../lib/notify';
import { navigate, taskPath } from '../../lib/router';
import { useLiveQuery } from '../../lib/useLiveQuery';
import { useRead } from '../../lib/useRead';
import { InlineError } from '../ErrorBanner';
import { RoleNote } from '../RoleNote';
import { useSecretNames } from './SecretNames';
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
  const manages = useRole().canSomewhere('admin');
  return (
    <section>
      <h1>Notifications</h1>
      <BrowserSettings />
      {manages ? <Channels /> : <RoleNote>Notification channels are set up by admins.</RoleNote>}
    </section>
  );
}

function Channels() {
  // `null` until the first read answers; a failed read shows its error with Retry.
  const list = useRead(readChannels);
  const channels = list.data;
  return (
    <>
      <h2>Channels</h2>
      <p className="hint">
        Each event that needs you is sent to the channels that take its kind: a webhook gets the record as JSON (signed
        with <code>x-kandev-signature</code> when it has a secret, typed here or a stored server secret from Settings ›
        Secrets), ntfy gets the title. Failed deliveries are retried for
        24 hours.
      </p>
      <InlineError error={list.error} onRetry={list.retry} testId="channels-error" />
      <ChannelTable channels={channels} readFailed={list.error !== null} onChange={list.retry} />
      <ChannelForm onDone={list.retry} />
      <DeliveryLog channels={channels ?? []} />
    </>
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
  const [tested, setTested] = useState<Record<string, { text: string; answer: string | null }>>({});
  const [editing, setEditing] = useState<string | null>(null);
  if (channels === null) return readFailed ? null : <p className="column-empty">Reading the channels…</p>;
  if (!channels.length) return <p className="column-empty">No channels yet.</p>;
  const test = (c: ChannelDto) =>
    void wrap(async () => {
      const r = await call('notification.channel.test', { id: c.id });
      const text = r.delivered ? `Test delivered (${r.http_status ?? 'ok'})` : `Test failed: ${r.error ?? 'no answer'}`;
      setTested((t) => ({ ...t, [c.id]: { text, answer: r.body ?? null } }));
    });
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
            <Fragment key={c.id}>
              <tr data-channel-id={c.id}>
                <td>{c.kind}</td>
                <td>
                  <code>{c.url_origin}</code>
                </td>
                <td>{c.events.map((k) => KIND_LABEL[k] ?? k).join(', ')}</td>
                <td data-testid="channel-signed">{signedLabel(c)}</td>
                <td className="row-actions">
                  <button onClick={() => test(c)}>Test</button>
                  <button onClick={() => setEditing(editing === c.id ? null : c.id)} aria-expanded={editing === c.id}>
                    Edit
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
              <TestResult result={tested[c.id]} />
              {editing === c.id && (
                <tr>
                  <td colSpan={5}>
                    <ChannelForm
                      channel={c}
                      onDone={() => {
                        setEditing(null);
                        onChange();
                      }}
                    />
                  </td>
                </tr>
              )}
            </Fragment>
          ))}
        </tbody>
      </table>
    </>
  );
}

/** What a channel's Test came to, with the receiver's answer. */
function TestResult({ result }: { result?: { text: string; answer: string | null } }) {
  if (!result) return null;
  return (
    <tr className="channel-test-row">
      <td colSpan={5} data-testid="channel-test-result">
        {result.text}
        {result.answer ? (
          <>
            {' '}
            · the receiver answered: <q className="receiver-answer">{result.answer}</q>
          </>
        ) : (
          ' · the receiver sent no text back'
        )}
      </td>
    </tr>
  );
}

/** A new channel, or (with `channel`) a change to one: its URL is a secret, so an empty URL
 * keeps it, as an empty secret keeps the secret. */
function ChannelForm({ channel, onDone }: { channel?: ChannelDto; onDone: () => void }) {
  const [kind, setKind] = useState<ChannelKindDto>(channel?.kind ?? 'webhook');
  const [url, setUrl] = useState('');
  const [signing, setSigning] = useState(() => signingForm(channel));
  const sign = (change: Partial<typeof signing>) => setSigning((now) => ({ ...now, ...change }));
  const storedNames = serverSecretNames(useSecretNames());
  const namesId = useId();
  const [events, setEvents] = useState<NotificationKindDto[]>(
    channel?.events ?? ['permission_requested', 'question_asked'],
  );
  const { wrap, view } = useFormError();
  const save = () =>
    channel
      ? call('notification.channel.update', {
          id: channel.id,
          url: url.trim() ? url : undefined,
          events,
          ...signingUpdate(signing, channel),
        })
      : call('notification.channel.create', {
          kind,
          url,
          events,
          ...signingCreate(signing, kind),
        });
  const title = channel ? `Edit the ${channel.kind} channel to ${channel.url_origin}` : 'Add a channel';
  return (
    <form
      className="form card-form"
      aria-label={channel ? 'Edit channel' : 'Add channel'}
      onSubmit={async (e) => {
        e.preventDefault();
        if (await wrap(save)) {
          setUrl('');
          setSigning(signingForm(channel));
          onDone();
        }
      }}
    >
      <h2>{title}</h2>
      <div className="row">
        {!channel && (
          <label>
            Kind
            <select value={kind} onChange={(e) => setKind(e.target.value as ChannelKindDto)}>
              <option value="webhook">Webhook</option>
              <option value="ntfy">ntfy</option>
            </select>
          </label>
        )}
        <label>
          URL{' '}
          <span className="hint">
            {channel ? 'leave empty to keep the current one' : 'kept secret: only its origin is shown again'}
          </span>
          <input
            value={url}
            onChange={(e) => setUrl(e.target.value)}
            required={!channel}
            placeholder={kind === 'ntfy' ? 'https://ntfy.sh/my-topic' : 'https://example.com/hook'}
          />
        </label>
      </div>
      {kind === 'webhook' && (
        <div className="row">
          <label>
            Sign with
            <select
              value={signing.source}
              disabled={signing.drop}
              onChange={(e) => sign({ source: e.target.value as SigningSource })}
            >
              <option value="typed">A secret typed here</option>
              <option value="stored">A stored secret</option>
            </select>
          </label>
          {signing.source === 'typed' ? (
            <label>
              Secret{' '}
              <span className="hint">
                {channel?.secret_name
                  ? `type one to sign with it instead of the stored secret ${channel.secret_name}`
                  : channel?.has_secret
                    ? 'leave empty to keep the current one'
                    : 'optional: signs each body (HMAC-SHA256)'}
              </span>
              <input
                type="password"
                value={signing.secret}
                disabled={signing.drop}
                onChange={(e) => sign({ secret: e.target.value })}
                autoComplete="off"
              />
            </label>
          ) : (
            <label>
              Stored secret{' '}
              <span className="hint">
                the name of a server secret of Settings › Secrets: its value signs each body (HMAC-SHA256)
              </span>
              <input
                value={signing.secretName}
                disabled={signing.drop}
                onChange={(e) => sign({ secretName: e.target.value })}
                list={storedNames.length ? namesId : undefined}
                autoComplete="off"
                spellCheck={false}
                placeholder="WEBHOOK_SECRET"
              />
              {storedNames.length > 0 && (
                <datalist id={namesId}>
                  {storedNames.map((n) => (
                    <option key={n} value={n} />
                  ))}
                </datalist>
              )}
            </label>
          )}
        </div>
      )}
      {channel?.has_secret && (
        <label className="check">
          <input type="checkbox" checked={signing.drop} onChange={(e) => sign({ drop: e.target.checked })} /> Stop
          signing (remove the secret)
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
          {channel ? 'Save channel' : 'Add channel'}
        </button>
        {channel && (
          <button type="button" onClick={onDone}>
            Cancel
          </button>
        )}
      </div>
    </form>
  );
}

const loadDeliveries = async () => (await call('notification.delivery.list', { limit: 100 })).deliveries;
const applyDelivery = (list: DeliveryDto[], n: Frame) => {
  if (n.topic !== 'notifications') return list;
  if (n.action !== 'notification.delivery.updated' && n.action !== 'notification.delivery.retried') return list;
  const d = n.payload.delivery;
  const rest = list.filter((x) => x.id !== d.id);
  return [d, ...rest].sort((a, b) => b.id - a.id).slice(0, 100);
};

/** The newest deliveries with every attempt, live (`notification.delivery.updated`): what each
 * was about (its event and task), and Retry now for one that waits or failed. */
function DeliveryLog({ channels }: { channels: ChannelDto[] }) {
  const q = useLiveQuery('notifications', loadDeliveries, applyDelivery);
  const { wrap, view } = useFormError();
  const origin = (id: string) => channels.find((c) => c.id === id)?.url_origin ?? 'deleted channel';
  const deliveries = q.data ?? [];
  return (
    <>
      <h2>Delivery log</h2>
      {view}
      {!deliveries.length ? (
        <p className="column-empty">{q.loading ? 'Loading…' : 'Nothing delivered yet.'}</p>
      ) : (
        <table className="table" aria-label="Delivery log">
          <thead>
            <tr>
              <th>Event</th>
              <th>Task</th>
              <th>Channel</th>
              <th>Status</th>
              <th>Attempts</th>
              <th />
            </tr>
          </thead>
          <tbody>
            {deliveries.map((d) => (
              <tr key={d.id} data-status={d.status} data-delivery-id={d.id}>
                <td>{KIND_LABEL[d.kind] ?? d.kind}</td>
                <td>
                  <a
                    href={taskPath(d.task_id)}
                    title={d.title}
                    onClick={(e) => {
                      e.preventDefault();
                      navigate(taskPath(d.task_id));
                    }}
                  >
                    {taskTitle(d.title)}
                  </a>
                </td>
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
                <td className="row-actions">
                  {d.status !== 'delivered' && (
                    <button onClick={() => void wrap(() => call('notification.delivery.retry', { id: d.id }))}>
                      Retry now
                    </button>
                  )}
                </td>
              </tr>
            ))}
          </tbody>
        </table>
      )}
    </>
  );
}

/** A record's title is "<task>: <what happened>": the task's part. */
function taskTitle(title: string): string {
  const cut = title.indexOf(': ');
  return cut > 0 ? title.slice(0, cut) : title;
}
