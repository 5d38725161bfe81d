// Creating a workspace from the header's workspace picker: a name and the template of its
// first board (a workspace without a board has nothing to show); then it is switched to.
import { useEffect, useState } from 'react';
import { call, errorText } from '../api/client';
import { useMutation } from '../lib/useMutation';
import { Dialog } from './Dialog';

/** The value of the workspace picker's "New workspace…" entry. */
export const NEW_WORKSPACE = '__new__';

export function NewWorkspaceDialog(props: { onClose: () => void; onCreated: (workspaceId: string) => void }) {
  const [name, setName] = useState('');
  const [templates, setTemplates] = useState<{ id: string; name: string }[]>([]);
  const [template, setTemplate] = useState('kanban');
  const { busy, error, setError, run } = useMutation();
  useEffect(() => {
    call('workflow.template.list', {})
      .then((r) => setTemplates(r.templates.map((t) => ({ id: t.id, name: t.name }))))
      .catch((e: unknown) => setError(errorText(e)));
  }, []);
  const submit = (e: React.FormEvent) => {
    e.preventDefault();
    void run(async () => {
      const { workspace } = await call('workspace.create', { name: name.trim() });
      const board = templates.find((t) => t.id === template)?.name ?? 'Kanban';
      await call('workflow.create', { workspace_id: workspace.id, name: board, template_id: template });
      props.onCreated(workspace.id);
    });
  };
  return (
    <Dialog title="New workspace" onClose={props.onClose}>
      <form className="form" onSubmit={submit}>
        <label>
          Name
          <input name="name" value={name} onChange={(e) => setName(e.target.value)} autoFocus required />
        </label>
        <label>
          First board
          <select name="template" value={template} onChange={(e) => setTemplate(e.target.value)}>
            {(templates.length ? templates : [{ id: 'kanban', name: 'Kanban' }]).map((t) => (
              <option key={t.id} value={t.id}>
                {t.name}
              </option>
            ))}
          </select>
        </label>
        {error && (
          <p className="form-error" role="alert">
            {error}
          </p>
        )}
        <div className="actions">
          <button type="button" onClick={props.onClose}>
            Cancel
          </button>
          <button className="primary" type="submit" disabled={busy}>
            {busy ? 'Creating…' : 'Create workspace'}
          </button>
        </div>
      </form>
    </Dialog>
  );
}
