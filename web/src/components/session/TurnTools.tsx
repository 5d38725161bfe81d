// Under each prompt of a turn that has a checkpoint (issue 48): "Changes of this turn" (its
// diff, checkpoint to checkpoint) and "Revert to before this turn", which first asks with the
// turns and files it undoes, and names files someone changed outside the agent's turns.
import { useCallback, useState } from 'react';
import { call, errorText } from '../../api/client';
import type { FileChangeDto, TurnCheckpointDto, TurnCheckpoints, TurnReverted } from '../../api/types';
import { toast } from '../../lib/toast';
import { useMutation } from '../../lib/useMutation';
import { useRead } from '../../lib/useRead';
import { Dialog } from '../Dialog';
import { FileDiffs } from '../GitPanel';

/** The session's turns with a checkpoint, by the id of the prompt each carried; read again
 * whenever `version` changes (a turn ended, a revert happened). */
export function useTurnCheckpoints(sessionId: string, version: string): Map<string, TurnCheckpointDto> {
  const load = useCallback(
    () => call('turn.checkpoint.list', { session_id: sessionId }),
    // `version` is the reason to read again.
    [sessionId, version],
  );
  const read = useRead<TurnCheckpoints>(load);
  const byMessage = new Map<string, TurnCheckpointDto>();
  for (const turn of read.data?.turns ?? []) {
    if (turn.message_id) byMessage.set(turn.message_id, turn);
  }
  return byMessage;
}

function fileList(files: { path: string }[], label: string) {
  const shown = files.slice(0, 30);
  return (
    <ul className="revert-files" aria-label={label}>
      {shown.map((f) => (
        <li key={f.path}>
          <code>{f.path}</code>
        </li>
      ))}
      {files.length > shown.length && <li>… and {files.length - shown.length} more</li>}
    </ul>
  );
}

export function TurnTools({
  sessionId,
  turn,
  busy,
  revertable = true,
}: {
  sessionId: string;
  turn: TurnCheckpointDto;
  busy: boolean;
  /** Whether "Revert" is offered (a member's; a viewer only reads the turn's changes). */
  revertable?: boolean;
}) {
  const action = useMutation();
  const [plan, setPlan] = useState<TurnReverted | null>(null);
  const [force, setForce] = useState(false);
  // Why the last try was refused (the files changed meanwhile), shown in the dialog.
  const [stale, setStale] = useState<string | null>(null);
  const [diff, setDiff] = useState<FileChangeDto[] | null>(null);
  const ids = { session_id: sessionId, turn_id: turn.turn_id };

  const ask = () =>
    action.run(
      async () => {
        setForce(false);
        setPlan(await call('turn.revert', { ...ids, dry_run: true }));
      },
      { describe: (e) => `Revert: ${errorText(e)}` },
    );
  // Only the outside edits the dialog showed are discarded: one that appeared since refuses
  // the revert, and the dialog shows the list again with the refusal.
  const revert = (shown: TurnReverted) =>
    action.run(async () => {
      const discard = force ? shown.outside_edits.map((f) => f.path) : [];
      try {
        const done = await call('turn.revert', { ...ids, discard });
        setPlan(null);
        setStale(null);
        const n = done.files.length;
        toast(`Files reverted to before turn ${turn.number}: ${n} file${n === 1 ? '' : 's'} changed back`);
      } catch (e) {
        setStale(errorText(e));
        setForce(false);
        setPlan(await call('turn.revert', { ...ids, dry_run: true }));
      }
    });
  const showDiff = () =>
    action.run(async () => setDiff((await call('turn.diff', ids)).files), {
      describe: (e) => `Changes of turn ${turn.number}: ${errorText(e)}`,
    });

  const later = plan ? plan.turns.length - 1 : 0;
  return (
    <div className="turn-tools" data-testid="turn-tools" data-turn={turn.number}>
      {turn.undone && <span className="badge">undone by a revert</span>}
      {turn.diff && (
        <button className="link" disabled={action.busy} onClick={() => void showDiff()}>
          Changes of this turn
        </button>
      )}
      {revertable && !turn.undone && (
        <button
          className="link"
          disabled={busy || action.busy}
          title={busy ? 'Wait for the agent to finish its turn (or cancel it)' : 'Put the files back as they were before this turn'}
          onClick={() => void ask()}
        >
          Revert to before this turn
        </button>
      )}
      {action.error && (
        <span className="form-error" role="alert">
          {action.error}
        </span>
      )}
      {plan && (
        <Dialog
          title={`Revert to before turn ${turn.number}?`}
          onClose={() => {
            setPlan(null);
            setStale(null);
          }}
        >
          {stale && (
            <p className="form-error" role="alert">
              Not reverted: {stale}. The lists below are up to date again.
            </p>
          )}
          <p>
            {later === 0
              ? `The files go back to how they were before turn ${turn.number}.`
              : `This also undoes the ${later} later turn${later === 1 ? '' : 's'}; the files go back to how they were before turn ${turn.number}.`}{' '}
            The conversation stays, and the agent is told with your next message.
          </p>
          <h3>Turns undone</h3>
          <ul className="revert-turns" aria-label="Turns undone">
            {plan.turns.map((t) => (
              <li key={t.turn_id}>
                Turn {t.number}
                {t.prompt && <span className="hint">: {t.prompt}</span>}
              </li>
            ))}
          </ul>
          <h3>Files changed back (rewritten, deleted or brought back)</h3>
          {plan.files.length === 0 ? <p className="hint">None: the files are already as they were.</p> : fileList(plan.files, 'Files changed back')}
          {plan.outside_edits.length > 0 && (
            <div className="banner warn" role="alert">
              <p>These files were changed after the agent's last turn, outside its turns (a terminal, an editor):</p>
              {fileList(plan.outside_edits, 'Changed outside the agent')}
              <label>
                <input type="checkbox" checked={force} onChange={(e) => setForce(e.target.checked)} /> Discard those changes too
              </label>
            </div>
          )}
          <div className="actions">
            <button
              onClick={() => {
                setPlan(null);
                setStale(null);
              }}
            >
              Cancel
            </button>
            <button className="danger" disabled={action.busy || (plan.outside_edits.length > 0 && !force)} onClick={() => void revert(plan)}>
              Revert files
            </button>
          </div>
        </Dialog>
      )}
      {diff && (
        <Dialog title={`Changes of turn ${turn.number}`} wide onClose={() => setDiff(null)}>
          {diff.length === 0 ? <p className="hint">This turn changed no file.</p> : <FileDiffs files={diff} />}
        </Dialog>
      )}
    </div>
  );
}
