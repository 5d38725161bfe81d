// Editing a task's title, description, parent and blockers (issues 18, 45), and deleting the
// task, from its page.
import { useState } from 'react';
import { ApiError, call } from '../api/client';
import type { TaskDto } from '../api/types';
import { navigate } from '../lib/router';
import { toast } from '../lib/toast';
import { useMutation } from '../lib/useMutation';
import { Dialog } from './Dialog';
import { type Links, TaskLinksFields, linksErrorText } from './TaskLinks';

export function EditTaskDialog({ task, onClose }: { task: TaskDto; onClose: () => void }) {
  const [title, setTitle] = useState(task.title);
  const [description, setDescription] = useState(task.description);
  const [links, setLinks] = useState<Links>({ parentId: task.parent_id ?? '', blockedBy: task.blocked_by });
  const { busy: saving, error, run } = useMutation();
  const save = () =>
    run(
      async () => {
        await call('task.update', {
          id: task.id,
          title,
          description,
          parent_id: links.parentId || null,
          blocked_by: links.blockedBy,
        });
        toast('Task saved');
        onClose();
      },
      { describe: linksErrorText },
    );
  return (
    <Dialog title="Edit task" onClose={onClose}>
      <form
        className="form"
        onSubmit={(e) => {
          e.preventDefault();
          void save();
        }}
      >
        <label>
          Title
          <input value={title} onChange={(e) => setTitle(e.target.value)} required />
        </label>
        <label>
          Description
          <textarea value={description} rows={6} onChange={(e) => setDescription(e.target.value)} />
        </label>
        <TaskLinksFields workflowId={task.workflow_id} taskId={task.id} links={links} onChange={setLinks} />
        {error && (
          <p className="form-error" role="alert">
            {error}
          </p>
        )}
        <div className="actions">
          <button type="button" onClick={onClose}>
            Cancel
          </button>
          <button className="primary" type="submit" disabled={saving || !title.trim()}>
            Save
          </button>
        </div>
      </form>
    </Dialog>
  );
}

export function DeleteTaskDialog({ task, onClose }: { task: TaskDto; onClose: () => void }) {
  // A worktree with uncommitted work is kept unless the user says otherwise (CONFLICT first):
  // the dialog says so in its own words and offers to delete it with that work.
  const { busy: deleting, error, run } = useMutation();
  const [dirty, setDirty] = useState(false);
  const remove = (force: boolean) =>
    run(async () => {
      await call('task.delete', { id: task.id, force }).catch((e: unknown) => {
        if (e instanceof ApiError && e.code === 'CONFLICT') {
          setDirty(true);
          throw new Error(
            'Its worktree has uncommitted or untracked work, so nothing was deleted. Commit that work first, or delete the task with it.',
          );
        }
        throw e;
      });
      navigate('/');
      toast(`Deleted “${task.title}”`);
    });
  return (
    <Dialog title="Delete this task?" onClose={onClose}>
      <p>
        Its agents are stopped, its sessions and transcripts removed and its worktrees deleted (the branches stay). This
        cannot be undone.
      </p>
      {error && (
        <p className="form-error" role="alert">
          {error}
        </p>
      )}
      <div className="actions">
        <button onClick={onClose}>Keep it</button>
        {dirty ? (
          <button className="danger" disabled={deleting} onClick={() => void remove(true)}>
            Delete with its uncommitted work
          </button>
        ) : (
          <button className="danger" disabled={deleting} onClick={() => void remove(false)}>
            Delete task
          </button>
        )}
      </div>
    </Dialog>
  );
}
