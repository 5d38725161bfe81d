// Settings › Prompts: the workspace's saved prompts (issue 18). `@name` in the composer inserts
// one; `{{prompt:name}}` in a step prompt stands for it when the step starts the agent. Adding
// and changing one is a member's of the workspace (issue 49).
import { useCallback, useState } from 'react';
import { call } from '../../api/client';
import type { SavedPromptDto } from '../../api/types';
import { readState, useData } from '../../lib/data';
import { useRole } from '../../lib/me';
import { useRead } from '../../lib/useRead';
import { InlineError } from '../ErrorBanner';
import { EmptyRow } from './EmptyRow';
import { useFormError } from './useFormError';

export function Prompts() {
  const { workspace } = useData();
  const workspaceId = workspace?.id ?? null;

  const [editing, setEditing] = useState<SavedPromptDto | null>(null);
  const [name, setName] = useState('');
  const [body, setBody] = useState('');
  const { wrap, view } = useFormError();
  const works = useRole().can('member');
  // Kept with the workspace it was read for: another workspace's shows nothing until read.
  const readPrompts = useCallback(
    async (): Promise<SavedPromptDto[]> =>
      workspaceId ? (await call('prompt.list', { workspace_id: workspaceId })).prompts : [],
    [workspaceId],
  );
  const list = useRead(readPrompts);
  const prompts = list.data;
  if (!workspace) return null;
  const edit = (p: SavedPromptDto | null) => {
    setEditing(p);
    setName(p?.name ?? '');
    setBody(p?.body ?? '');
  };
  return (
    <section>
      <h1>Saved prompts</h1>
      <p className="hint">
        Type <code>@name</code> in a message to insert a prompt; write <code>{'{{prompt:name}}'}</code> in a step prompt to use
        it when the step starts the agent.
      </p>
      <InlineError error={list.error} onRetry={list.retry} testId="prompts-error" />
      <table className="table" aria-label="Saved prompts">
        <thead>
          <tr>
            <th>Name</th>
            <th>Prompt</th>
            {works && <th />}
          </tr>
        </thead>
        <tbody>
          {!prompts?.length && (
            <EmptyRow
              columns={works ? 3 : 2}
              state={readState(list)}
              what="saved prompts"
              none={works ? 'No saved prompts yet: add one below.' : 'No saved prompts yet.'}
            />
          )}
          {prompts?.map((p) => (
            <tr key={p.id}>
              <td>
                <code>@{p.name}</code>
              </td>
              <td className="prompt-body">{p.body.length > 120 ? `${p.body.slice(0, 120)}…` : p.body}</td>
              {works && (
                <td className="row-actions">
                  <button onClick={() => edit(p)}>Edit</button>
                  <button
                    className="danger-outline"
                    aria-label={`Delete ${p.name}`}
                    onClick={() =>
                      void wrap(async () => {
                        await call('prompt.delete', { id: p.id });
                        if (editing?.id === p.id) edit(null);
                        list.retry();
                      })
                    }
                  >
                    Delete
                  </button>
                </td>
              )}
            </tr>
          ))}
        </tbody>
      </table>
      {works && (
        <form
          className="form card-form"
          aria-label={editing ? `Edit prompt ${editing.name}` : 'Add prompt'}
          onSubmit={async (e) => {
            e.preventDefault();
            const ok = await wrap(async () => {
              if (editing) await call('prompt.update', { id: editing.id, name, body });
              else await call('prompt.create', { workspace_id: workspace.id, name, body });
              list.retry();
            });
            if (ok) edit(null);
          }}
        >
          <h2>{editing ? `Edit @${editing.name}` : 'Add a prompt'}</h2>
          <label>
            Name <span className="hint">letters, digits, - and _ (used as @name)</span>
            <input value={name} onChange={(e) => setName(e.target.value)} required placeholder="review-checklist" />
          </label>
          <label>
            Prompt
            <textarea rows={4} value={body} onChange={(e) => setBody(e.target.value)} required />
          </label>
          {view}
          <div className="actions">
            {editing && (
              <button type="button" onClick={() => edit(null)}>
                Cancel
              </button>
            )}
            <button className="primary" type="submit">
              {editing ? 'Save prompt' : 'Add prompt'}
            </button>
          </div>
        </form>
      )}
    </section>
  );
}
