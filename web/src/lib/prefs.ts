// A browser's own choices (the workspace shown, the diff view), kept in localStorage. Keeping
// them is a convenience: where storage is refused (private mode, a full quota) the page works
// the same, from the defaults.
import { useState } from 'react';

export function readPref(key: string): string | null {
  try {
    return localStorage.getItem(key);
  } catch {
    return null;
  }
}

export function writePref(key: string, value: string): void {
  try {
    localStorage.setItem(key, value);
  } catch {
    /* not kept: see above */
  }
}

/** A yes/no choice kept under `key` (false until chosen). */
export function useFlagPref(key: string): [boolean, (on: boolean) => void] {
  const [on, setOn] = useState(() => readPref(key) === 'yes');
  return [
    on,
    (value: boolean) => {
      writePref(key, value ? 'yes' : 'no');
      setOn(value);
    },
  ];
}
