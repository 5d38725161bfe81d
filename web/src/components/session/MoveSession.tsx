// Moving a session to another agent profile (issue 52, `session.rebind`): the picker and the
// Move button, shown in the session's "Move to another agent…" dialog and, for a session whose
// profile was deleted, in the banner above its composer.
import { useId, useState } from 'react';
import { call, errorText } from '../../api/client';
import { useData } from '../../lib/data';
import { MOVE_EXPLAINED, moveTargets } from '../../lib/rebind';
import { toast } from '../../lib/toast';
import { useMutation } from '../../lib/useMutation';
import { Dialog } from '../Dialog';

export function MoveSession(props: {
  sessionId: string;
  /** The session's profile (not offered); null once it was deleted. */
  currentProfileId: string | null;
  /** Why the session cannot move now (its agent works), or null. */
  blocked: string | null;
  /** Called once the server moved it. */
  onMoved?: () => void;
}) {
  const { profiles, profilesRead } = useData();
  const targets = moveTargets(profiles, props.currentProfileId);
  const [picked, setPicked] = useState('');
  const chosen = targets.find((p) => p.id === picked) ?? targets[0];
  const move = useMutation();
  const pickerId = useId();
  if (profilesRead === 'done' && targets.length === 0) {
    return <p className="hint">No other agent profile to move it to: add one in Settings → Agent profiles.</p>;
  }
  return (
    <form
      className="move-session"
      aria-label="Move to another agent"
      onSubmit={(e) => {
        e.preventDefault();
        if (!chosen) return;
        void move.run(
          async () => {
            await call('session.rebind', { session_id: props.sessionId, profile_id: chosen.id });
            toast(`Moved to ${chosen.name}: it starts with a summary of the conversation`);
            props.onMoved?.();
          },
          { describe: (err) => `Move: ${errorText(err)}` },
        );
      }}
    >
      <p className="hint">{MOVE_EXPLAINED}</p>
      <div className="move-row">
        <label htmlFor={pickerId}>Move to</label>
        <select
          id={pickerId}
          value={chosen?.id ?? ''}
          onChange={(e) => setPicked(e.target.value)}
          disabled={targets.length === 0}
        >
          {targets.map((p) => (
            <option key={p.id} value={p.id}>
              {p.name}
            </option>
          ))}
        </select>
        <button
          type="submit"
          className="primary"
          disabled={!chosen || move.busy || props.blocked !== null}
          title={props.blocked ?? undefined}
        >
          {move.busy ? 'Moving…' : 'Move'}
        </button>
      </div>
      {props.blocked && <p className="hint">{props.blocked}</p>}
      {move.error && (
        <p className="form-error" role="alert">
          {move.error}
        </p>
      )}
    </form>
  );
}

/** The session toolbar's "Move to another agent…" dialog. */
export function MoveDialog(props: {
  sessionId: string;
  currentProfileId: string | null;
  blocked: string | null;
  onClose: () => void;
}) {
  return (
    <Dialog title="Move to another agent" onClose={props.onClose}>
      <MoveSession
        sessionId={props.sessionId}
        currentProfileId={props.currentProfileId}
        blocked={props.blocked}
        onMoved={props.onClose}
      />
    </Dialog>
  );
}

/** What a session whose profile was deleted shows above its composer: what happened, and (to a
 * member) the way on. */
export function DeletedProfileBanner(props: {
  sessionId: string;
  name: string;
  blocked: string | null;
  /** Whether the person may move it (a member); a viewer reads the note alone. */
  canMove: boolean;
}) {
  return (
    <div className="banner warn deleted-profile" role="alert" data-testid="deleted-profile">
      <strong>
        The agent profile {props.name} of this session was deleted.{' '}
        {props.canMove ? 'Move the session to another agent to go on.' : 'A member can move it to another agent.'}
      </strong>
      {props.canMove && <MoveSession sessionId={props.sessionId} currentProfileId={null} blocked={props.blocked} />}
    </div>
  );
}
