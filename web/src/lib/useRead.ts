// A read that is not live (nothing announces changes: installed agents, workflow templates):
// done once on mount, its failure shown to the person with a way to try again.
import { useCallback, useEffect, useState } from 'react';
import { errorText } from '../api/client';

export interface Read<T> {
  data: T | null;
  error: string | null;
  retry: () => void;
}

/** Reads with `load` (stable between renders: `useCallback`) when mounted and on `retry`. */
export function useRead<T>(load: () => Promise<T>): Read<T> {
  // Kept with the `load` that read it: a new `load` shows nothing until its own answer.
  const [result, setResult] = useState<{ load: () => Promise<T>; value: T } | null>(null);
  const [error, setError] = useState<string | null>(null);
  const [attempt, setAttempt] = useState(0);
  useEffect(() => {
    let stop = false;
    setError(null);
    load().then(
      (value) => {
        if (stop) return;
        setResult({ load, value });
      },
      (e: unknown) => !stop && setError(errorText(e)),
    );
    return () => {
      stop = true;
    };
  }, [load, attempt]);
  const retry = useCallback(() => setAttempt((a) => a + 1), []);
  return { data: result && result.load === load ? result.value : null, error, retry };
}
