// Whether the window is at least `minWidth` pixels wide, following resizes (a media query,
// so the page reflows with no polling).
import { useEffect, useState } from 'react';

export function useWide(minWidth: number): boolean {
  const query = `(min-width: ${minWidth}px)`;
  const [wide, setWide] = useState(() => window.matchMedia(query).matches);
  useEffect(() => {
    const media = window.matchMedia(query);
    const changed = () => setWide(media.matches);
    changed();
    media.addEventListener('change', changed);
    return () => media.removeEventListener('change', changed);
  }, [query]);
  return wide;
}

/** The widest window (px) laid out as a phone (the stylesheet's `max-width: 700px`). */
export const PHONE_MAX = 700;

/** Whether the window is laid out as a phone. */
export function usePhone(): boolean {
  return !useWide(PHONE_MAX + 1);
}
