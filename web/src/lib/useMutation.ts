// The one way an action taken in the UI keeps its busy and error state: `run` does the work,
// keeps a failure as the text to show, and says whether it succeeded.
import { useCallback, useState } from 'react';
import { errorText } from '../api/client';

export interface RunOptions {
  /** The text shown for a failure (by default the error's own, `errorText`). */
  describe?: (e: unknown) => string;
  /** Leave the error shown before in place when this run starts: several runs that report
   * together (one per file of a drop) clear it once, before the first. */
  keepError?: boolean;
}

export interface Mutation {
  /** Some run has not finished yet. */
  busy: boolean;
  /** The last failure's text (null when the errors go to `report`). */
  error: string | null;
  /** Sets or clears the error directly (a dismiss button, a check before any call). */
  setError: (error: string | null) => void;
  run: (work: () => Promise<unknown>, options?: RunOptions) => Promise<boolean>;
}

/**
 * A mutation's state. `report`, when given, receives the error instead (a parent that shows
 * it, or a slot several mutations share): cleared with null when a run starts, then the failure.
 */
export function useMutation(report?: (error: string | null) => void): Mutation {
  // A count rather than a flag: runs may overlap, and the state is busy until the last ends.
  const [pending, setPending] = useState(0);
  const [ownError, setOwnError] = useState<string | null>(null);
  const setError = report ?? setOwnError;
  const run = useCallback(
    async (work: () => Promise<unknown>, { describe = errorText, keepError = false }: RunOptions = {}) => {
      setPending((n) => n + 1);
      if (!keepError) setError(null);
      try {
        await work();
        return true;
      } catch (e) {
        setError(describe(e));
        return false;
      } finally {
        setPending((n) => n - 1);
      }
    },
    [setError],
  );
  return { busy: pending > 0, error: report ? null : ownError, setError, run };
}
