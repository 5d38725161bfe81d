// The one row of a settings table that has no rows to show: while its first read is under
// way it says so, after it that there are none; after a failed read nothing (the error is
// shown with its Retry). An empty table says neither.
import type { ReadState } from '../../lib/data';

export function EmptyRow({ columns, state, what, none }: { columns: number; state: ReadState; what: string; none: string }) {
  if (state === 'failed') return null;
  return (
    <tr>
      <td colSpan={columns} className="hint">
        {state === 'reading' ? `Reading the ${what}…` : none}
      </td>
    </tr>
  );
}
