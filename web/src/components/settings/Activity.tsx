// Settings › Activity (issue 49): the audit log, newest first — who changed what, when, in
// which workspace. The server answers only entries of the workspaces the reader administers
// (every entry for the owner). Filters: a user's name, an action or the start of one
// ("task." for every task change), a workspace. Older entries come a page at a time, from the
// server's cursor.
import { useCallback, useState } from 'react';
import { call } from '../../api/client';
import type { AuditEntries, AuditEntryDto } from '../../api/types';
import { readState, useData } from '../../lib/data';
import { useRole } from '../../lib/me';
import { can } from '../../lib/roles';
import { useMutation } from '../../lib/useMutation';
import { useRead } from '../../lib/useRead';
import { InlineError } from '../ErrorBanner';
import { EmptyRow } from './EmptyRow';

/** Entries in one page. */
const PAGE = 50;

interface Filter {
  by: string;
  action: string;
  workspaceId: string;
}

const NO_FILTER: Filter = { by: '', action: '', workspaceId: '' };

export function Activity() {
  const { workspaces } = useData();
  const { me } = useRole();
  // The workspaces whose entries this reader gets: those they administer (all for the owner).
  const own = me ? workspaces.filter((w) => can(me, w.id, 'admin')) : [];
  const [draft, setDraft] = useState<Filter>(NO_FILTER);
  const [filter, setFilter] = useState<Filter>(NO_FILTER);
  const read = useCallback(
    (cursor?: string): Promise<AuditEntries> =>
      call('audit.list', {
        by: filter.by.trim() || undefined,
        action: filter.action.trim() || undefined,
        workspace_id: filter.workspaceId || undefined,
        cursor,
        limit: PAGE,
      }),
    [filter],
  );
  const first = useCallback(() => read(), [read]);
  const page = useRead(first);
  // Older pages, appended by "Load older"; dropped when the filter (and so the first page) changes.
  const [older, setOlder] = useState<{ for: AuditEntries; entries: AuditEntryDto[]; next: string | null } | null>(null);
  const more = useMutation();
  const current = page.data && older?.for === page.data ? older : null;
  const entries = page.data ? [...page.data.entries, ...(current?.entries ?? [])] : [];
  const next = current ? current.next : (page.data?.next_cursor ?? null);
  const workspaceName = (id: string | null) =>
    id === null ? 'the server' : (workspaces.find((w) => w.id === id)?.name ?? 'a removed workspace');
  return (
    <section>
      <h1>Activity</h1>
      <p className="hint">
        Every change made on this server, newest first: {me?.owner ? 'all of it' : 'in the workspaces you administer'}.
      </p>
      <form
        className="form card-form"
        aria-label="Filter the activity"
        onSubmit={(e) => {
          e.preventDefault();
          setFilter(draft);
        }}
      >
        <div className="row">
          <label>
            User
            <input value={draft.by} onChange={(e) => setDraft({ ...draft, by: e.target.value })} placeholder="any" autoComplete="off" />
          </label>
          <label>
            Action <span className="hint">a name, or its start like task.</span>
            <input
              value={draft.action}
              onChange={(e) => setDraft({ ...draft, action: e.target.value })}
              placeholder="any"
              autoComplete="off"
              spellCheck={false}
            />
          </label>
          <label>
            Workspace
            <select value={draft.workspaceId} onChange={(e) => setDraft({ ...draft, workspaceId: e.target.value })}>
              <option value="">{me?.owner ? 'All, and the server’s own' : 'All you administer'}</option>
              {own.map((w) => (
                <option key={w.id} value={w.id}>
                  {w.name}
                </option>
              ))}
            </select>
          </label>
        </div>
        <div className="actions">
          <button
            type="button"
            onClick={() => {
              setDraft(NO_FILTER);
              setFilter(NO_FILTER);
            }}
          >
            Clear
          </button>
          <button className="primary" type="submit">
            Show
          </button>
        </div>
      </form>
      <InlineError error={page.error} onRetry={page.retry} testId="activity-error" />
      <table className="table labelled" aria-label="Activity">
        <thead>
          <tr>
            <th>When</th>
            <th>Who</th>
            <th>Action</th>
            <th>Workspace</th>
            <th>About</th>
          </tr>
        </thead>
        <tbody>
          {entries.length === 0 && <EmptyRow columns={5} state={readState(page)} what="activity" none="Nothing matches." />}
          {entries.map((e) => (
            <tr key={e.id} data-action={e.action}>
              <td data-label="When">{new Date(e.at).toLocaleString()}</td>
              <td data-label="Who">{e.by}</td>
              <td data-label="Action">
                <code>{e.action}</code>
              </td>
              <td data-label="Workspace">{workspaceName(e.workspace_id)}</td>
              <td data-label="About">{e.target && <code>{e.target}</code>}</td>
            </tr>
          ))}
        </tbody>
      </table>
      <InlineError error={more.error} />
      {next !== null && page.data && (
        <div className="actions">
          <button
            disabled={more.busy}
            onClick={() => {
              const base = page.data;
              if (!base) return;
              void more.run(async () => {
                // The cursor names the last entry shown: the next page neither skips nor repeats one.
                const r = await read(next);
                setOlder({ for: base, entries: [...(current?.entries ?? []), ...r.entries], next: r.next_cursor });
              });
            }}
          >
            Load older
          </button>
        </div>
      )}
    </section>
  );
}
