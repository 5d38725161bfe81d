// A terminal-UI session's screen (issue 52): the agent's own terminal UI, streamed like a user
// terminal whose id is the session's, and a badge of what its screen shows.
import { useEffect, useRef, useState } from 'react';
import type { SessionDto, TuiScreenDto } from '../../api/types';
import { XtermView } from '../XtermView';

const SCREEN_TEXT: Record<TuiScreenDto, string> = {
  working: 'Working',
  waiting: 'Waiting for input',
  permission: 'Asks a permission — answer in the terminal',
  unknown: 'Unknown screen',
};

/** What the screen shows, as its badge says it; `null` before the program first drew. */
export function tuiScreenText(screen: TuiScreenDto | null): string | null {
  return screen ? SCREEN_TEXT[screen] : null;
}

export function TuiScreenBadge({ screen }: { screen: TuiScreenDto | null }) {
  const text = tuiScreenText(screen);
  if (!text) return null;
  return (
    <span className={`badge tui-screen tui-${screen}`} data-testid="tui-screen" data-screen={screen}>
      {text}
    </span>
  );
}

/** States in which the session's program does not run. */
const STOPPED = new Set(['CREATED', 'CANCELLED', 'FAILED']);

export function TuiPanel({ session }: { session: SessionDto }) {
  // The program's terminal ends when it stops (or exits), and a resume or a message starts it
  // again under the same id; an attach can also come before the terminal is made. So once the
  // attachment ended or failed, the view attaches anew at the session's next change that
  // says the program runs (its state or its screen).
  const [attachment, setAttachment] = useState(0);
  const [staleAt, setStaleAt] = useState<string | null>(null);
  const now = `${session.state}:${session.tui_screen}`;
  const running = !STOPPED.has(session.state);
  useEffect(() => {
    if (staleAt !== null && staleAt !== now && running) {
      setStaleAt(null);
      setAttachment((n) => n + 1);
    }
  }, [staleAt, now, running]);
  // Read when the attachment ends, not when it was made.
  const current = useRef(now);
  current.current = now;
  const stale = () => setStaleAt(current.current);
  return (
    <div className="tui-panel" data-testid="tui-panel">
      <XtermView
        key={attachment}
        terminalId={session.id}
        label="The agent's terminal UI"
        onExit={stale}
        onProblem={stale}
      />
    </div>
  );
}
