// Starts an agent session on a task: the agent profile, the first message, and whether the
// agent runs its own terminal UI in a terminal (issue 52) instead of speaking ACP.
import { useState } from 'react';
import { call } from '../api/client';
import type { SessionDto } from '../api/types';
import { useData } from '../lib/data';
import { useMutation } from '../lib/useMutation';
import { ProfileSelect } from './ProfileSelect';

export function StartSession(props: {
  taskId: string;
  defaultProfile: string | null;
  prompt: string;
  onStarted?: (s: SessionDto) => void;
}) {
  const { profiles } = useData();
  const [profile, setProfile] = useState(props.defaultProfile ?? profiles[0]?.id ?? '');
  const [prompt, setPrompt] = useState(props.prompt);
  const [terminalUi, setTerminalUi] = useState(false);
  const { busy, error, run } = useMutation();
  return (
    <form
      className="form start-session"
      onSubmit={(e) => {
        e.preventDefault();
        void run(async () => {
          const { session } = await call('session.launch', {
            task_id: props.taskId,
            agent_profile_id: profile || undefined,
            prompt: prompt.trim() ? prompt : undefined,
            terminal_ui: terminalUi || undefined,
          });
          props.onStarted?.(session);
        });
      }}
    >
      {!props.onStarted && <p>No agent session yet.</p>}
      <ProfileSelect value={profile} onChange={setProfile} />
      <label>
        First message
        <textarea rows={4} value={prompt} onChange={(e) => setPrompt(e.target.value)} />
      </label>
      <label className="check" title="Its screen shows here as a terminal; your messages are typed into it">
        <input type="checkbox" checked={terminalUi} onChange={(e) => setTerminalUi(e.target.checked)} />
        Start in the agent's own terminal UI
      </label>
      {error && (
        <p className="form-error" role="alert">
          {error}
        </p>
      )}
      <div className="actions">
        <button className="primary" type="submit" disabled={busy}>
          Start agent
        </button>
      </div>
    </form>
  );
}
