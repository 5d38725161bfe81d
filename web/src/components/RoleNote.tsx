// What stands where a control is hidden from a role that cannot use it (issue 49): what the
// person can do instead, in a line. A control hidden among others says nothing.
import type { ReactNode } from 'react';

export function RoleNote({ children }: { children: ReactNode }) {
  return (
    <p className="role-note" role="note" data-testid="role-note">
      {children}
    </p>
  );
}

/** The note for a viewer where the work on a task is done (the composer, the start form). */
export const VIEWER_NOTE =
  'Viewers can read this task; ask an admin of the workspace to make you a member to work on it.';
